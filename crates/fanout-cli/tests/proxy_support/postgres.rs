//! A private PostgreSQL server that a test may stop and start: a real outage, which
//! the shared test cluster (other tests use it at the same time) must never see.
//!
//! The binaries are the ones `scripts/with-postgres.sh --check` finds; as root, the
//! server runs as the `postgres` OS user (initdb refuses root), as that script does.
//! Without the binaries the caller skips, unless PostgreSQL tests are required
//! (`CI=true` or `FANOUT_REQUIRE_POSTGRES=1`): then it fails.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The OS user the server runs as when the tests run as root.
const OS_USER: &str = "postgres";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn is_root() -> bool {
    // /proc/self belongs to the process's effective user (no unsafe geteuid needed).
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

/// `argv` as the server's OS user.
fn as_server_user(argv: &[&str]) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", OS_USER, "--"]).args(argv);
        // Somewhere that user may stand (the test's own directory may not be).
        command.current_dir("/tmp");
        command
    } else {
        let mut command = Command::new(argv[0]);
        command.args(&argv[1..]);
        command
    }
}

fn run(mut command: Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The directory of `initdb`, `pg_ctl` and `postgres`, or `None` (the caller skips).
fn bindir() -> Option<PathBuf> {
    let check = Command::new(repo().join("scripts/with-postgres.sh"))
        .arg("--check")
        .output()
        .ok()
        .filter(|out| out.status.success());
    let Some(check) = check else {
        let required = std::env::var("FANOUT_REQUIRE_POSTGRES").is_ok_and(|v| v == "1")
            || fanout_types::in_ci();
        assert!(
            !required,
            "PostgreSQL server binaries are required here (CI=true or FANOUT_REQUIRE_POSTGRES=1) and scripts/with-postgres.sh --check found none"
        );
        eprintln!("skipping a PostgreSQL outage test: no PostgreSQL server binaries");
        return None;
    };
    let text = String::from_utf8_lossy(&check.stdout);
    let dir = text.split(" (").next()?.trim();
    Some(PathBuf::from(dir))
}

/// A directory the server's OS user may enter (temporary directories are 0700).
fn shared_tempdir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("fanout-pg-test")
        .tempdir_in("/tmp")
        .expect("temporary directory");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn give_to_server_user(path: &Path) {
    if is_root() {
        run(
            {
                let mut chown = Command::new("chown");
                chown.args(["-R", &format!("{OS_USER}:")]).arg(path);
                chown
            },
            "chown the cluster",
        );
    }
}

/// One private server on its own port. Stopped (if running) when dropped.
pub struct PgServer {
    _dir: tempfile::TempDir,
    data: PathBuf,
    log: PathBuf,
    sockets: PathBuf,
    bindir: PathBuf,
    pub port: u16,
}

impl PgServer {
    /// A new running server with a database `fanout_test`; `None`: no binaries here
    /// (and none required).
    pub fn start() -> Option<PgServer> {
        let bindir = bindir()?;
        let dir = shared_tempdir();
        let data = dir.path().join("data");
        give_to_server_user(dir.path());
        run(
            as_server_user(&[
                bindir.join("initdb").to_str().unwrap(),
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ]),
            "initdb",
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let server = PgServer {
            log: dir.path().join("postgres.log"),
            sockets: dir.path().to_owned(),
            data,
            bindir,
            port,
            _dir: dir,
        };
        server.start_again();
        server.create_database("fanout_test");
        Some(server)
    }

    /// Creates database `name` on the server; returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        run(
            as_server_user(&[
                self.bindir.join("psql").to_str().unwrap(),
                "-X",
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-c",
                &format!("CREATE DATABASE {name}"),
            ]),
            "create a database",
        );
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// The URL of database `fanout_test`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/fanout_test", self.port)
    }

    fn pg_ctl(&self, args: &[&str]) -> Command {
        let pg_ctl = self.bindir.join("pg_ctl");
        let mut argv = vec![pg_ctl.to_str().unwrap(), "-D", self.data.to_str().unwrap()];
        argv.extend_from_slice(args);
        as_server_user(&argv)
    }

    /// Starts the server (again), waiting until it accepts connections.
    pub fn start_again(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.sockets.display()
        );
        run(
            self.pg_ctl(&[
                "start",
                "-w",
                "-t",
                "60",
                "-l",
                self.log.to_str().unwrap(),
                "-o",
                &options,
            ]),
            "pg_ctl start",
        );
    }

    /// Stops the server the way an operator would (`fast`: sessions are ended, then
    /// it shuts down), waiting until it is down.
    pub fn stop(&self) {
        run(
            self.pg_ctl(&["stop", "-w", "-t", "60", "-m", "fast"]),
            "pg_ctl stop",
        );
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self
            .pg_ctl(&["stop", "-w", "-t", "30", "-m", "immediate"])
            .output();
    }
}
