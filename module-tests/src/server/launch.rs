//! Spawning the process: the config file the harness writes, waiting for the first
//! `PING`, and the low-level process and connection handling behind [`Server`].

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::lock::lock;
use super::paths::module_path;
use super::ports_dirs::{conf_value, quote_conf};
use super::{tail_lines, Server, IO_TIMEOUT, START_TIMEOUT};

/// Why [`Server::launch`] failed: a taken port is retried, anything else is fatal.
pub(super) enum StartError {
    PortInUse,
    Failed(String),
}

impl Server {
    pub(super) fn write_config(&self) -> PathBuf {
        let mut c = String::new();
        let user: HashSet<String> = self
            .opts
            .config
            .iter()
            .map(|(k, _)| k.to_ascii_lowercase())
            .collect();
        let mut put = |k: &str, v: &str, quoted: bool| {
            if user.contains(k) {
                return;
            }
            let v = if quoted { quote_conf(v) } else { conf_value(v) };
            let _ = writeln!(c, "{k} {v}");
        };
        put("port", &self.port.to_string(), false);
        put("bind", "127.0.0.1", false);
        put("daemonize", "no", false);
        put("dir", &self.dir.to_string_lossy(), true);
        put(
            "logfile",
            &self.dir.join("server.log").to_string_lossy(),
            true,
        );
        put("save", "", false);
        // Full syncs start at once instead of after the default 5 s delay.
        put("repl-diskless-sync-delay", "0", false);
        if self.kind.is_v7_or_later() {
            put("enable-debug-command", "yes", false);
            put("enable-module-command", "yes", false);
        }
        if self.opts.cluster {
            put("cluster-enabled", "yes", false);
            put("cluster-config-file", "nodes.conf", false);
        }
        if self.opts.load_module {
            let m = self.opts.module.clone().unwrap_or_else(module_path);
            let mut line = format!("loadmodule {}", quote_conf(&m.to_string_lossy()));
            for a in &self.opts.module_args {
                line.push(' ');
                line.push_str(&quote_conf(a));
            }
            let _ = writeln!(c, "{line}");
            // Every test checks tally's in-memory copies against the stored values: a
            // stale copy answers an error (and counts in INFO `tally_cache_mismatches`).
            if !self.opts.module_args.iter().any(|a| a == "check-caches") {
                let _ = writeln!(c, "tally.check-caches yes");
            }
        }
        for (k, v) in &self.opts.config {
            let _ = writeln!(c, "{k} {}", conf_value(v));
        }
        let path = self.dir.join("server.conf");
        fs::write(&path, c).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// Spawns the process on `self.port` with the existing directory and waits
    /// for PING.
    pub(super) fn launch(&self) -> Result<(), StartError> {
        let conf = self.write_config();
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("stdout.log"))
            .expect("open stdout.log");
        let err = out.try_clone().expect("dup stdout.log");
        let log_len = fs::metadata(self.log_path()).map(|m| m.len()).unwrap_or(0);
        let mut command = Command::new(&self.kind.bin);
        if let Some(lib) = self.kind.jemalloc_preload() {
            let mut preload = lib.into_os_string();
            if let Some(more) = std::env::var_os("LD_PRELOAD") {
                preload.push(" ");
                preload.push(more);
            }
            command.env("LD_PRELOAD", preload);
            // As `jemalloc-bg-thread yes`, the default of a server built with jemalloc:
            // freed pages go back to the system from a background thread. Without it the
            // main thread purges them inside whatever allocates next: timer ticks of 16-35
            // ms while the scan after a `DEBUG RELOAD` of 2M counters ran (3-5 ms with it).
            command.env("MALLOC_CONF", "background_thread:true");
        }
        let child = command
            .arg(&conf)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| {
                StartError::Failed(format!("cannot spawn {}: {e}", self.kind.bin.display()))
            })?;
        *lock(&self.child) = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.exit_status() {
                let log = self.log_since(log_len);
                if log.contains("Address already in use") {
                    return Err(StartError::PortInUse);
                }
                return Err(StartError::Failed(format!(
                    "{} on port {} exited during startup ({status}).\n--- server.log (new part) ---\n{}\n--- stdout.log ---\n{}",
                    self.kind.name,
                    self.port,
                    tail_lines(&log, 40),
                    tail_lines(&fs::read_to_string(self.dir.join("stdout.log")).unwrap_or_default(), 20),
                )));
            }
            if let Ok(mut c) = self.try_connect(false, Duration::from_millis(500)) {
                match redis::cmd("PING").query::<String>(&mut c) {
                    Ok(_) => return Ok(()),
                    Err(e) if e.code() == Some("LOADING") => {}
                    Err(_) => {}
                }
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(StartError::Failed(format!(
                    "{} on port {} did not answer PING within {:?}.\n--- server.log ---\n{}",
                    self.kind.name,
                    self.port,
                    START_TIMEOUT,
                    self.log_tail(40)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(super) fn log_since(&self, offset: u64) -> String {
        let mut s = String::new();
        if let Ok(mut f) = fs::File::open(self.log_path()) {
            let _ = f.seek(SeekFrom::Start(offset));
            let mut buf = Vec::new();
            let _ = f.read_to_end(&mut buf);
            s = String::from_utf8_lossy(&buf).into_owned();
        }
        s
    }

    pub(super) fn exit_status(&self) -> Option<ExitStatus> {
        let mut g = lock(&self.child);
        match g.as_mut() {
            Some(c) => c.try_wait().ok().flatten(),
            None => None,
        }
    }

    pub(super) fn kill(&self) {
        if let Some(mut c) = lock(&self.child).take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub(super) fn try_connect(
        &self,
        resp3: bool,
        timeout: Duration,
    ) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url(resp3))?;
        let c = client.get_connection_with_timeout(timeout)?;
        c.set_read_timeout(Some(IO_TIMEOUT))?;
        c.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(c)
    }

    pub(crate) fn url(&self, resp3: bool) -> String {
        if resp3 {
            format!("redis://127.0.0.1:{}/?protocol=resp3", self.port)
        } else {
            format!("redis://127.0.0.1:{}/", self.port)
        }
    }
}
