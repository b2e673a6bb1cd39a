//! deploy/: the Kubernetes Indexed Job and the Slurm script, run as far as a machine without a
//! cluster allows. The Job's pods are N local processes started as Kubernetes starts them (its
//! manifest's args and env, `$(VAR)` expanded, `JOB_COMPLETION_INDEX` set, stdout and stderr
//! in one log), gathered by deploy/kubernetes/gather.sh through a `kubectl` that serves those
//! logs, and followed by the follow pod's own command; the srun step is the sbatch script run
//! by bash with an `srun` that starts its tasks here as srun does (`SLURM_PROCID`,
//! `SLURM_NTASKS`, `SLURM_STEP_ID`). Against an in-process server (tests/common), which says
//! what arrived: every request of the one schedule, once. Every wait is bounded and every
//! process started here is killed and reaped when the test ends: a pod or task that fails or
//! hangs fails the test with what it said, and leaves nothing running.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use common::traffic_server::{now_unix_s, Timing, TrafficServer};
use serde_json::Value;

fn server() -> TrafficServer {
    TrafficServer::start(Timing {
        base: Duration::from_millis(10),
        per_token: Duration::ZERO,
        itl: Duration::from_millis(1),
        max_model_len: 4096,
    })
}

/// How long a job of these tests may take before it is called stuck: a pod or task that
/// fails or hangs ends the test with what it said, not a test that never ends.
const JOB_BOUND: Duration = Duration::from_secs(90);
/// How long a script that waits for a job (gather.sh, the batch script) may run: longer than
/// the job, so that its own wait gives up first and says so.
const SCRIPT_BOUND: Duration = Duration::from_secs(120);

/// A process the test started, killed and reaped when the test ends however it ends (a
/// failed assertion included). With `group`, the whole process group it leads is killed (an
/// srun's tasks with it).
struct Reaped {
    child: Child,
    group: bool,
}

impl Reaped {
    fn new(child: Child) -> Reaped {
        Reaped {
            child,
            group: false,
        }
    }

    /// A child started with `process_group(0)`: it leads a group of its own.
    fn group_leader(child: Child) -> Reaped {
        Reaped { child, group: true }
    }

    /// Its exit status once it has ended, or `None` if it is still running at `deadline`.
    fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        if self.group {
            // The group this test made for it: its leader's id is the group's.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.child.id())])
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd` to its end in a process group of its own, its output kept in files (no pipe to
/// fill), and kills the group if it is still running after `SCRIPT_BOUND`.
fn run_bounded(cmd: &mut Command, what: &str) -> Output {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    cmd.stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .process_group(0);
    let mut child = Reaped::group_leader(cmd.spawn().unwrap());
    let status = child.wait_until(Instant::now() + SCRIPT_BOUND);
    let (stdout, stderr) = (
        std::fs::read(&out_path).unwrap_or_default(),
        std::fs::read(&err_path).unwrap_or_default(),
    );
    let Some(status) = status else {
        drop(child);
        panic!(
            "{what}: still running after {SCRIPT_BOUND:?}, killed\n{}{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        );
    };
    Output {
        status,
        stdout,
        stderr,
    }
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// PATH with `first` and the infertop binary's directory in front.
fn path_with(first: &Path) -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_infertop")).parent().unwrap();
    format!(
        "{}:{}:{}",
        first.display(),
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A YAML list item's value, unquoted (`- "--rate"` → `--rate`).
fn item(line: &str) -> Option<String> {
    let v = line.trim().strip_prefix("- ")?.trim();
    let v = v
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(v);
    Some(v.replace("\\\"", "\""))
}

/// The list under `key:` (its items, until the indentation goes back).
fn list(yaml: &str, key: &str) -> Vec<String> {
    let mut lines = yaml.lines().skip_while(|l| l.trim() != format!("{key}:"));
    let Some(head) = lines.next() else {
        return Vec::new();
    };
    let indent = head.len() - head.trim_start().len();
    lines
        .take_while(|l| l.len() - l.trim_start().len() > indent || l.trim().starts_with("- "))
        .filter_map(item)
        .collect()
}

/// The container's plain env values (`- name: X` / `value: "Y"`).
fn env(yaml: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut name = None;
    for l in yaml.lines().map(str::trim) {
        if let Some(n) = l.strip_prefix("- name: ") {
            name = Some(n.to_string());
        } else if let (Some(v), Some(n)) = (l.strip_prefix("value: "), name.take()) {
            out.insert(n, v.trim_matches('"').to_string());
        }
    }
    out
}

/// Kubernetes' `$(VAR)` expansion of an argument.
fn expand(arg: &str, vars: &HashMap<String, String>) -> String {
    let mut out = arg.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("$({k})"), v);
    }
    out
}

fn value_after(args: &mut [String], flag: &str, value: &str) {
    let at = args.iter().position(|a| a == flag).unwrap();
    args[at + 1] = value.to_string();
}

fn records_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    v.sort();
    v
}

/// Every request of the records, by number: each of `0..n` once.
fn assert_every_request_once(records: &[PathBuf], n: u64) {
    let mut numbers: Vec<u64> = records
        .iter()
        .flat_map(|r| {
            std::fs::read_to_string(r)
                .unwrap()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|v| v["type"] == "request")
                .map(|v| v["index"].as_u64().unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    numbers.sort();
    assert_eq!(numbers, (0..n).collect::<Vec<_>>());
}

#[test]
fn the_indexed_job_runs_as_kubernetes_starts_its_pods() {
    let srv = server();
    let dir = tempfile::tempdir().unwrap();
    let (records, logs, bin) = (
        dir.path().join("records"),
        dir.path().join("logs"),
        dir.path().join("bin"),
    );
    for d in [&records, &logs, &bin] {
        std::fs::create_dir(d).unwrap();
    }
    let job = std::fs::read_to_string(repo("deploy/kubernetes/job.yaml")).unwrap();
    let n: usize = job
        .lines()
        .find_map(|l| l.trim().strip_prefix("completions: "))
        .unwrap()
        .parse()
        .unwrap();
    let mut vars = env(&job);
    assert_eq!(vars["JOB_COMPLETION_COUNT"], n.to_string(), "completions");
    assert_eq!(
        job.lines()
            .find_map(|l| l.trim().strip_prefix("parallelism: "))
            .unwrap(),
        n.to_string()
    );
    // What the commands in the manifest's comment fill in: the server and the start.
    let start_at = (now_unix_s() + 7.0).floor();
    assert_eq!(vars["START_AT"], "@START_AT@");
    vars.insert("START_AT".into(), start_at.to_string());
    vars.insert("ENDPOINT".into(), srv.url.clone());
    let mut args = list(&job, "args");
    assert!(!args.is_empty());
    // A shorter run than the manifest's, at its rate.
    value_after(&mut args, "--requests", "120");
    let mut pods: Vec<Reaped> = Vec::new();
    for k in 0..n {
        let pod = format!("infertop-load-{k}-x7f2q");
        let mut vars = vars.clone();
        vars.insert("POD_NAME".into(), pod.clone());
        let argv: Vec<String> = args
            .iter()
            .map(|a| expand(a, &vars).replace("/records/", &format!("{}/", records.display())))
            .collect();
        // The container's log: stdout and stderr together.
        let log = File::create(logs.join(format!("{pod}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_infertop"))
            .args(&argv)
            .envs(&vars)
            .env("JOB_COMPLETION_INDEX", k.to_string())
            .env_remove("SLURM_PROCID")
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        pods.push(Reaped::new(child));
    }
    // `kubectl` as gather.sh uses it: the Job done, its completions, a pod by index, its log
    // (the pods have ended when their records have footers). Its wait gives up as kubectl's
    // `--timeout` does (exit 1), after the test's bound rather than gather.sh's day.
    let polls = (JOB_BOUND.as_secs_f64() / 0.2).ceil() as u64;
    executable(
        &bin.join("kubectl"),
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n  wait) i=0; while [ \"$(cat {logs}/*.log | grep -c '\"type\":\"footer\"')\" -lt {n} ]; do i=$((i + 1)); if [ \"$i\" -gt {polls} ]; then echo \"error: timed out waiting for the condition on jobs/${{4#job/}}\" >&2; exit 1; fi; sleep 0.2; done ;;\n  get) if [ \"$2\" = job ]; then echo {n}; else echo \"infertop-load-${{4##*=}}-x7f2q\"; fi ;;\n  logs) cat \"{logs}/$2.log\" ;;\nesac\n",
            logs = logs.display()
        ),
    );
    let out_dir = dir.path().join("gathered");
    let out = run_bounded(
        Command::new("sh")
            .arg(repo("deploy/kubernetes/gather.sh"))
            .arg("infertop-load")
            .arg(&out_dir)
            .env("PATH", path_with(&bin)),
        "gather.sh",
    );
    let report = String::from_utf8_lossy(&out.stdout);
    let pod_log = |k: usize| {
        std::fs::read_to_string(logs.join(format!("infertop-load-{k}-x7f2q.log")))
            .unwrap_or_default()
    };
    assert!(
        out.status.success(),
        "{report}{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        (0..n).map(pod_log).collect::<Vec<_>>().join("\n")
    );
    // Every pod ended, and ended well (a Job whose pods failed is no complete Job).
    let deadline = Instant::now() + JOB_BOUND;
    for (k, pod) in pods.iter_mut().enumerate() {
        let status = pod.wait_until(deadline);
        assert!(
            status.is_some_and(|s| s.success()),
            "pod {k}: {status:?}\n{}",
            pod_log(k)
        );
    }
    assert!(
        report.contains(&format!("## Sources ({n} records as one run)")),
        "{report}"
    );
    assert!(report.contains("reference clock"), "{report}");
    let gathered = records_in(&out_dir);
    assert_eq!(gathered.len(), n);
    assert_every_request_once(&gathered, 120);
    // The pods' logs had infertop's own lines too: gather.sh kept the records whole.
    let log0 = std::fs::read_to_string(logs.join("infertop-load-0-x7f2q.log")).unwrap();
    assert!(log0.contains("infertop: shard 0/"), "{log0}");
    assert!(
        srv.seen()
            .iter()
            .filter(|s| s.path.ends_with("/completions"))
            .count()
            == 120
    );

    // The follow pod's command, on the records volume.
    let follow = std::fs::read_to_string(repo("deploy/kubernetes/follow.yaml")).unwrap();
    let command = list(&follow, "command");
    assert_eq!(command[..2], ["sh", "-c"]);
    let script = command[2].replace("/records/", &format!("{}/", records.display()));
    let out = run_bounded(
        Command::new("sh")
            .args(["-c", &script])
            .env("SHARDS", env(&follow)["SHARDS"].clone())
            .env("PATH", path_with(&bin)),
        "the follow pod's command",
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        summary.contains(&format!("## Sources ({n} merged)")),
        "{summary}"
    );
    // A row per shard's record under the sources' header.
    let table = summary
        .split("| source | state | requests | failed | TTFT p50 | TPOT p50 |\n|---|---|---:|---:|---:|---:|\n")
        .nth(1)
        .unwrap_or_default();
    let rows = table.lines().take_while(|l| l.starts_with("| ")).count();
    assert_eq!(rows, n, "{summary}");
    assert_every_request_once(&records_in(&records), 120);
}

#[test]
fn the_srun_script_runs_as_srun_starts_its_tasks() {
    let srv = server();
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    // srun as it starts a step's tasks: N copies of the command, each told its rank.
    executable(
        &bin.join("srun"),
        "#!/bin/bash\nn=1\nwhile [ $# -gt 0 ]; do case \"$1\" in --ntasks=*) n=${1#--ntasks=}; shift ;; -n) n=$2; shift 2 ;; -*) shift ;; *) break ;; esac; done\npids=()\nfor ((k = 0; k < n; k++)); do SLURM_PROCID=$k SLURM_NTASKS=$n SLURM_STEP_ID=0 \"$@\" & pids+=($!); done\nrc=0\nfor p in \"${pids[@]}\"; do wait \"$p\" || rc=1; done\nexit $rc\n",
    );
    let out_dir = dir.path().join("out");
    // The batch script, its srun and the tasks in one process group, killed if it hangs.
    let out = run_bounded(
        Command::new("bash")
            .arg(repo("deploy/slurm/infertop-load.sbatch"))
            .args([&srv.url, "--rate", "40", "--requests", "100", "--seed", "5"])
            .current_dir(dir.path())
            .env("PATH", path_with(&bin))
            // What sbatch gives the batch script: the job's tasks, and no step of its own.
            .env("SLURM_NTASKS", "3")
            .env("SLURM_JOB_ID", "4242")
            .env("SLURM_PROCID", "0")
            .env_remove("SLURM_STEP_ID")
            .env_remove("JOB_COMPLETION_INDEX")
            .env("INFERTOP_OUT", &out_dir)
            .env("INFERTOP_START_DELAY", "6"),
        "the sbatch script",
    );
    let report = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{report}{stderr}");
    for k in 0..3 {
        assert!(
            stderr.contains(&format!("shard {k}/3 (from SLURM_PROCID")),
            "{stderr}"
        );
    }
    assert!(
        report.contains("## Sources (3 records as one run)"),
        "{report}"
    );
    // The job's output, for --nocapture.
    eprint!("{stderr}{report}");
    let records = records_in(&out_dir);
    assert_eq!(records.len(), 3);
    assert_every_request_once(&records, 100);
}

/// The Slurm script submitted with `sbatch` to a real one-node cluster
/// (`scripts/slurm-one-node.sh`; `INFERTOP_SLURM=1` says one is running): Slurm starts the
/// batch script, its srun step starts the tasks, each a shard of one schedule, and the job's
/// output is their report as one run. Without a cluster the test says so and passes, unless
/// `INFERTOP_REQUIRE_REAL=1`.
#[test]
fn the_sbatch_script_runs_on_a_real_slurm() {
    if std::env::var("INFERTOP_SLURM").as_deref() != Ok("1") {
        assert!(
            !common::real_server::required(),
            "INFERTOP_REQUIRE_REAL=1 but INFERTOP_SLURM is not 1 (scripts/slurm-one-node.sh)"
        );
        eprintln!("skipped: run scripts/slurm-one-node.sh and set INFERTOP_SLURM=1");
        return;
    }
    let srv = server();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let job_out = dir.path().join("job.out");
    // One node: the script's one task a node becomes three on it; --wait returns when the job
    // ends, with its exit code.
    let out = run_bounded(
        Command::new("sbatch")
            .args(["--wait", "--ntasks=3", "--ntasks-per-node=3", "--time=5"])
            .arg(format!("--output={}", job_out.display()))
            .arg(format!("--chdir={}", dir.path().display()))
            .arg("--export=ALL")
            .arg(repo("deploy/slurm/infertop-load.sbatch"))
            .args([&srv.url, "--rate", "40", "--requests", "100", "--seed", "5"])
            .env("PATH", path_with(dir.path()))
            .env("INFERTOP_OUT", &out_dir)
            .env("INFERTOP_START_DELAY", "6"),
        "sbatch",
    );
    let job = std::fs::read_to_string(&job_out).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}{}\n{job}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Submitted batch job"),
        "{out:?}"
    );
    for k in 0..3 {
        assert!(
            job.contains(&format!("shard {k}/3 (from SLURM_PROCID")),
            "{job}"
        );
    }
    assert!(job.contains("## Sources (3 records as one run)"), "{job}");
    eprint!("{job}");
    let records = records_in(&out_dir);
    assert_eq!(records.len(), 3, "{job}");
    assert_every_request_once(&records, 100);
}
