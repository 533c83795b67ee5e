//! A private PostgreSQL cluster of a test's own (`initdb` in a temporary directory, a
//! Unix socket there, a port of its own), which the test may restart or starve of disk
//! without disturbing the machine's server. Needs the server's binaries and, as root, the
//! `postgres` user to run them as (PostgreSQL refuses to run as root).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The cluster: its data directory, socket directory and port; stopped and removed on drop.
pub(crate) struct OwnCluster {
    root: PathBuf,
    bin: PathBuf,
    port: u16,
    /// A tmpfs mounted for a tablespace, unmounted on drop.
    mounts: Vec<PathBuf>,
}

/// The directory of the newest installed server's binaries.
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> =
        std::fs::read_dir("/usr/lib/postgresql").ok()?.flatten().map(|e| e.path()).collect();
    versions.sort();
    versions.into_iter().rev().map(|v| v.join("bin")).find(|b| b.join("initdb").exists())
}

/// Runs `cmd` as the `postgres` user when this process is root.
fn as_postgres(bin: &Path, tool: &str, args: &[&str]) -> Command {
    let mut c = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(tool));
        c
    } else {
        Command::new(bin.join(tool))
    };
    c.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    c
}

/// Whether this process runs as root (from `/proc/self/status`, no `libc`).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

fn run(mut c: Command, what: &str) -> Result<(), String> {
    let out = c.output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{what} failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(())
}

impl OwnCluster {
    /// Creates and starts a cluster; `Err` says why it cannot be had here.
    pub(crate) fn start() -> Result<OwnCluster, String> {
        let bin = bin_dir().ok_or("no PostgreSQL server binaries under /usr/lib/postgresql")?;
        let port = 20000 + (rand::random::<u16>() % 20000);
        let root = std::env::temp_dir().join(format!("session-pg-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        let cluster = OwnCluster { root, bin, port, mounts: Vec::new() };
        if is_root() {
            run(
                {
                    let mut c = Command::new("chown");
                    c.args(["-R", "postgres:postgres"]).arg(&cluster.root);
                    c
                },
                "chown",
            )?;
        }
        let data = cluster.data();
        run(
            as_postgres(
                &cluster.bin,
                "initdb",
                &["-D", path_str(&data)?, "-A", "trust", "-U", "postgres", "--no-sync"],
            ),
            "initdb",
        )?;
        cluster.pg_ctl(&["start"])?;
        Ok(cluster)
    }

    fn data(&self) -> PathBuf {
        self.root.join("data")
    }

    /// `pg_ctl ACTION` on the cluster, waiting for it to finish.
    fn pg_ctl(&self, action: &[&str]) -> Result<(), String> {
        let opts = format!("-p {} -k {} -c listen_addresses='' -c fsync=on", self.port, path_str(&self.root)?);
        let data = self.data();
        let log = self.root.join("log");
        let mut args = vec!["-D", path_str(&data)?, "-l", path_str(&log)?, "-o", &opts, "-w", "-m", "fast"];
        args.extend_from_slice(action);
        run(as_postgres(&self.bin, "pg_ctl", &args), &format!("pg_ctl {action:?}"))
    }

    /// Restarts the server (fast shutdown: connections are dropped).
    pub(crate) fn restart(&self) -> Result<(), String> {
        self.pg_ctl(&["restart"])
    }

    /// The connection string of the `postgres` database.
    pub(crate) fn conn(&self) -> String {
        format!("host={} port={} user=postgres dbname=postgres", self.root.display(), self.port)
    }

    /// Mounts a tmpfs of `bytes` for a tablespace and returns its directory, owned by
    /// the server's user.
    pub(crate) fn tiny_disk(&mut self, bytes: u64) -> Result<PathBuf, String> {
        let dir = self.root.join(format!("disk{}", self.mounts.len()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        run(
            {
                let mut c = Command::new("mount");
                c.args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"]).arg(&dir);
                c
            },
            "mount tmpfs",
        )?;
        self.mounts.push(dir.clone());
        run(
            {
                let mut c = Command::new("chown");
                c.arg("postgres:postgres").arg(&dir);
                c
            },
            "chown",
        )?;
        Ok(dir)
    }
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str().ok_or_else(|| format!("{} is not UTF-8", p.display()))
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["stop"]);
        for m in &self.mounts {
            let _ = Command::new("umount").arg(m).status();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
