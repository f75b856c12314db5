//! How to start a [`Server`](super::Server): [`ServerOptions`].

use std::path::PathBuf;

/// How to start a [`Server`](super::Server). Build with [`ServerOptions::new`] and the
/// chaining methods; every field is public for inspection.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Load the module (default true). See [`ServerOptions::without_module`].
    pub load_module: bool,
    /// Module path; `None` means [`module_path()`](super::module_path).
    pub module: Option<PathBuf>,
    /// Arguments after the module path on the `loadmodule` line.
    pub module_args: Vec<String>,
    /// Extra config directives, written after the harness defaults. A name
    /// given here replaces the harness default of the same name (`save`,
    /// `repl-diskless-sync-delay`, ...).
    pub config: Vec<(String, String)>,
    /// Start with `cluster-enabled yes` and `cluster-config-file nodes.conf`.
    pub cluster: bool,
    /// Tag used in the directory name; default: the current test's name.
    pub tag: Option<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions::new()
    }
}

impl ServerOptions {
    /// Defaults: module loaded with no arguments, no extra config, standalone.
    pub fn new() -> Self {
        ServerOptions {
            load_module: true,
            module: None,
            module_args: Vec::new(),
            config: Vec::new(),
            cluster: false,
            tag: None,
        }
    }

    /// Add a config directive, e.g. `.config("appendonly", "yes")` or
    /// `.config("maxmemory", "2mb")`. The value is written verbatim after the
    /// name on the config-file line (so `"900 1"` is two tokens, as multi-arg
    /// directives want); an empty value is written as `""`.
    pub fn config(mut self, name: &str, value: &str) -> Self {
        self.config.push((name.to_string(), value.to_string()));
        self
    }

    /// Arguments passed to the module on its `loadmodule` line.
    pub fn module_args<S: AsRef<str>>(mut self, args: &[S]) -> Self {
        self.module_args = args.iter().map(|s| s.as_ref().to_string()).collect();
        self
    }

    /// Load this module file instead of [`module_path()`](super::module_path).
    pub fn module(mut self, path: impl Into<PathBuf>) -> Self {
        self.module = Some(path.into());
        self
    }

    /// Start a plain server without any module.
    pub fn without_module(mut self) -> Self {
        self.load_module = false;
        self
    }

    /// Enable cluster mode (`cluster-enabled yes`, `cluster-config-file nodes.conf`).
    pub fn cluster(mut self, on: bool) -> Self {
        self.cluster = on;
        self
    }

    /// Directory-name tag (default: current test name).
    pub fn tag(mut self, tag: &str) -> Self {
        self.tag = Some(tag.to_string());
        self
    }
}
