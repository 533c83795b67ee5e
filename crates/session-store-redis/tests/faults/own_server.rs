//! A private `redis-server` on a port of its own, for faults the shared server must not see
//! (a tiny `maxmemory`, a small string limit, restarts). Killed and removed on drop.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;

pub(crate) struct OwnRedis {
    child: Option<Child>,
    pub(crate) port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

impl OwnRedis {
    /// Starts `redis-server` with `args`, or returns why it cannot.
    pub(crate) fn start(args: &[&str]) -> Result<OwnRedis, String> {
        let port = 20_000 + (rand::rng().next_u32() % 20_000) as u16;
        let dir = std::env::temp_dir().join(format!("sess-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut me = OwnRedis { child: None, port, dir, args: args.iter().map(|a| (*a).to_owned()).collect() };
        me.spawn()?;
        Ok(me)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run redis-server: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!("redis-server on port {} did not start", self.port))
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (SIGKILL: nothing is flushed that the settings do not flush).
    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port and directory.
    pub(crate) fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.spawn()
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
