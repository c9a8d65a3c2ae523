mod agent_loop;
mod provider;
mod support;
