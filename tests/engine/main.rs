mod agent_loop;
mod cli;
mod loop_http;
mod provider;
mod support;
