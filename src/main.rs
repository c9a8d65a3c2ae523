fn main() -> std::process::ExitCode {
    vibedesk::cli::main()
}
