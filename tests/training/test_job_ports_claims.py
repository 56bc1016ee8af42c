"""Issue 28: the port slot claimed on the nodes themselves (checks/cluster/port_claims.py). The node side is
the real shell script, run by /bin/sh on this machine, each node a directory of its own (what the fleet's
sessions would run on each node); two controllers race in threads started at the same moment."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from ascend_ready.checks.cluster.port_claims import (
    NodeClaims,
    claim_script,
    parse_claim_reply,
    slurm_job_over,
)
from ascend_ready.checks.cluster.port_plan import PortClaims, make_plan
from ascend_ready.errors import ParseError, TrainingError
from ascend_ready.fleet.sessions import LocalSession
from ascend_ready.training import job_ports

NODES = ["node01", "node02"]


class LocalNodes:
    """NodeClaims' `run`: the script by /bin/sh here, its claims directory one of `root/<node>` per node."""

    def __init__(self, root: Path, reverse: bool = False):
        self.root, self.calls, self.reverse = root, [], reverse

    def dir_of(self, node: str) -> Path:
        return self.root / node / "claims"

    def __call__(self, nodes, script):
        self.calls.append(list(nodes))
        out = {}
        for node in (nodes[::-1] if self.reverse else nodes):  # a transport that reaches the last first
            (self.root / node).mkdir(parents=True, exist_ok=True)
            text = script.replace(str(self.root / "claims"), str(self.dir_of(node)))
            proc = subprocess.run(["/bin/sh", "-c", text], capture_output=True, text=True, timeout=30)
            assert not proc.stderr, proc.stderr
            out[node] = (proc.returncode, proc.stdout)
        return out


def _claims(root: Path, job: str, nodes: LocalNodes | None = None) -> NodeClaims:
    return NodeClaims(nodes or LocalNodes(root), job, directory=str(root / "claims"))


def test_a_slot_is_claimed_on_every_node_and_released_by_its_owner_only(tmp_path):
    nodes = LocalNodes(tmp_path)
    a, b = _claims(tmp_path, "job-a", nodes), _claims(tmp_path, "job-b", nodes)
    assert a.claim(0, NODES) is None
    owner = json.loads((nodes.dir_of("node02") / "slot-0" / "owner").read_text())
    assert owner["job_id"] == "job-a" and owner["token"] == a.token and owner["node_boot_id"]
    assert (nodes.dir_of("node01").stat().st_mode & 0o7777) == 0o1777  # every user's jobs claim there
    why = b.claim(0, ["node02"])
    assert why.startswith("node02: slot 0 is claimed by job job-a (controller ")
    b.release()  # holds nothing: removes nothing of job-a's
    assert (nodes.dir_of("node01") / "slot-0").is_dir()
    assert a.claim(0, NODES) is None  # its own claim again (one /var/tmp seen from two names): granted
    a.release()
    assert not list(nodes.dir_of("node01").iterdir()) and not list(nodes.dir_of("node02").iterdir())


def test_two_controllers_claiming_at_once_get_disjoint_slots(tmp_path):
    for round_no in range(3):  # each round a race: slot 0 both ways round
        root = tmp_path / str(round_no)
        nodes = LocalNodes(root)
        # their transports reach the nodes in opposite orders: at once, each gets one node of slot 0
        jobs = [_claims(root, f"job-{i}", LocalNodes(root, reverse=i == 1)) for i in range(2)]
        start = threading.Barrier(len(jobs))
        got: dict[str, int] = {}

        def launch(claims: NodeClaims, start=start, got=got) -> None:
            start.wait()
            for slot in range(16):
                if claims.claim(slot, NODES) is None:
                    got[claims.owner["job_id"]] = slot
                    return

        threads = [threading.Thread(target=launch, args=(j,)) for j in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(got) == ["job-0", "job-1"] and got["job-0"] != got["job-1"], got
        for node in NODES:  # each slot's claim on every node is its one job's
            for slot_dir in nodes.dir_of(node).glob("slot-*"):
                owner = json.loads((slot_dir / "owner").read_text())["job_id"]
                assert got[owner] == int(slot_dir.name.split("-")[1])


def test_a_claim_of_a_rebooted_node_or_of_a_gone_job_here_is_reaped(tmp_path):
    nodes = LocalNodes(tmp_path)
    old = _claims(tmp_path, "job-old", nodes)
    assert old.claim(0, NODES) is None and old.claim(1, NODES) is None
    # slot 0 on node01: made before the node's last boot
    path = nodes.dir_of("node01") / "slot-0" / "owner"
    path.write_text(path.read_text().replace('"node_boot_id": "', '"node_boot_id": "before-'))
    # slot 1: its controller is this host, its pid gone
    for node in NODES:
        path = nodes.dir_of(node) / "slot-1" / "owner"
        path.write_text(path.read_text().replace(f'"pid": {old.owner["pid"]}', '"pid": 4194303'))
    new = _claims(tmp_path, "job-new", nodes)
    assert new.claim(0, ["node01"]) is None
    assert new.claim(1, NODES) is None
    assert {json.loads((nodes.dir_of(n) / f"slot-{s}" / "owner").read_text())["job_id"]
            for n in NODES for s in (1,)} == {"job-new"}
    # slot 0 on node02 was made in this boot by a live job (this process): respected
    assert "claimed by job job-old" in new.claim(0, ["node02"])
    assert not list(nodes.dir_of("node01").glob(".reap.*"))


#: what `squeue --noheader --jobs ID --states=all --format=%T` prints (stdout, stderr, exit status):
#: a final state while slurmctld still holds the job; past MinJobAge, one id it no longer knows
#: (fractal-server#1681, MatterMiners/tardis#326, reframe#3122); slurmctld down (Slurm's
#: slurm_strerror for SLURM_COMMUNICATIONS_CONNECTION_ERROR)
SQUEUE = {
    "running": ("RUNNING\n", "", 0),
    "completing": ("COMPLETING\n", "", 0),
    "cancelled": ("CANCELLED\n", "", 0),
    "node-fail": ("NODE_FAIL\n", "", 0),
    "forgotten": ("", "slurm_load_jobs error: Invalid job id specified\n", 1),
    "empty": ("", "", 0),
    "controller-down": ("", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
                        1),
    "new-state": ("RESV_DEL_HOLD\n", "", 0),
}


@pytest.mark.parametrize("case,over", [("running", False), ("completing", False), ("cancelled", True),
                                       ("node-fail", True), ("forgotten", True), ("empty", True),
                                       ("controller-down", False), ("new-state", False)])
def test_slurm_says_whether_a_claims_job_is_over_and_an_unsure_answer_is_no(case, over):
    calls = []

    def squeue(argv, **kw):
        calls.append(argv)
        out, err, rc = SQUEUE[case]
        return subprocess.CompletedProcess(argv, rc, out, err)

    assert slurm_job_over("4100", run=squeue) is over
    assert calls == [["squeue", "--noheader", "--jobs", "4100", "--states=all", "--format=%T"]]


def test_no_squeue_on_the_controller_reaps_nothing():
    def missing(argv, **kw):
        raise FileNotFoundError(2, "No such file or directory", "squeue")

    assert slurm_job_over("4100", run=missing) is False


def test_a_claim_of_another_batch_hosts_slurm_job_is_reaped_once_slurm_says_it_is_over(tmp_path, monkeypatch):
    """Under Slurm the controller is the job's batch host, which the next job's may not be: a claim left by a
    job killed there (scancel past KillWait, its batch host lost) is judged by asking Slurm, not its pid."""
    nodes = LocalNodes(tmp_path)
    monkeypatch.setenv("SLURM_JOB_ID", "4100")
    old = _claims(tmp_path, "job-old", nodes)
    assert old.owner["slurm_job_id"] == "4100"
    assert old.claim(0, NODES) is None
    for node in NODES:  # made by the batch host of job 4100, not this one
        path = nodes.dir_of(node) / "slot-0" / "owner"
        path.write_text(path.read_text().replace(f'"controller": "{old.owner["controller"]}"',
                                                 '"controller": "node07"'))
    monkeypatch.setenv("SLURM_JOB_ID", "4101")
    asked = []
    live = NodeClaims(nodes, "job-live", directory=str(tmp_path / "claims"),
                      slurm_over=lambda job: asked.append(job) or False)
    why = live.claim(0, NODES)
    assert why.startswith("node01: slot 0 is claimed by job job-old (controller node07, ") and "4100" in why
    assert set(asked) == {"4100"}
    new = NodeClaims(nodes, "job-new", directory=str(tmp_path / "claims"),
                     slurm_over=lambda job: job == "4100")
    assert new.claim(0, NODES) is None
    assert {json.loads((nodes.dir_of(n) / "slot-0" / "owner").read_text())["job_id"] for n in NODES} == {
        "job-new"}
    # a claim of the same allocation (an earlier launch of this batch script) is judged by its pid as before
    monkeypatch.setenv("SLURM_JOB_ID", "4101")
    again = NodeClaims(nodes, "job-again", directory=str(tmp_path / "claims"), slurm_over=lambda job: True)
    assert "claimed by job job-new" in again.claim(0, ["node01"])


def test_a_claims_directory_the_user_cannot_create_in_refuses_naming_node_path_and_fix(tmp_path):
    nodes = LocalNodes(tmp_path)
    (tmp_path / "node02").mkdir()
    nodes.dir_of("node02").write_text("")  # not a directory: no claim can be made on node02
    claims = _claims(tmp_path, "job-a", nodes)
    with pytest.raises(TrainingError) as exc:
        claims.claim(0, NODES)
    assert f"node02: cannot create {nodes.dir_of('node02')} as " in exc.value.message
    assert "chmod 1777" in exc.value.hint
    assert not (nodes.dir_of("node01") / "slot-0").exists()  # what it got is given back


@pytest.mark.parametrize("text", ["", "granted\ngranted\n", "grant\n", "held {not json}\n", "error\n"])
def test_a_reply_that_is_not_the_scripts_refuses(text):
    with pytest.raises(ParseError, match="port claim reply"):
        parse_claim_reply(text)


def test_the_claim_script_is_posix_sh():
    script = claim_script("/var/tmp/x", 3, {"token": "t", "job_id": "j"}, reap=["a", "b"])
    for shell in ("/bin/sh", "dash", "bash"):
        try:
            proc = subprocess.run([shell, "-n", "-c", script], capture_output=True, text=True, timeout=10)
        except FileNotFoundError:
            continue
        assert proc.returncode == 0, (shell, proc.stderr)


def test_the_launchers_claim_takes_the_next_slot_a_node_holds_and_releases_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCEND_READY_STATE_DIR", str(tmp_path / "state"))
    from ascend_ready.training.config import load_config

    cfg = load_config("tiny")
    hosts = {n: type("H", (), {"devices": [0, 1]})() for n in NODES}
    other = _claims(tmp_path, "another-controllers-job")  # its node side: the first node's directory
    assert other.claim(0, ["node01"]) is None
    claims = NodeClaims(LocalNodes(tmp_path), "mine", directory=str(tmp_path / "claims"))
    plan, release = job_ports.claim("mine", hosts, {}, cfg, ["train"], rendezvous_port=29500,
                                    pinned_rendezvous=False, on_nodes=claims, listeners={},
                                    log=lambda m: None)
    assert plan.slot == 1 and plan.rendezvous_port == 29501
    release()
    assert not (tmp_path / "node02" / "claims" / "slot-1").exists()
    assert not list((tmp_path / "state" / "port-claims").glob("*.json"))
    # through the fleet's sessions: a LocalSession is this machine as a node
    monkeypatch.setenv("ASCEND_READY_NODE_CLAIMS_DIR", str(tmp_path / "here"))
    plan, release = job_ports.claim("mine", {"local": hosts["node01"]}, {}, cfg, ["train"],
                                    rendezvous_port=29500, pinned_rendezvous=False, listeners={},
                                    sessions={"local": LocalSession("local")}, log=lambda m: None)
    assert plan.slot == 0 and (tmp_path / "here" / "slot-0" / "owner").is_file()
    release()
    assert not (tmp_path / "here" / "slot-0").exists()


def test_a_stranger_on_the_claimed_slot_refuses_and_gives_the_claim_back(tmp_path):
    from ascend_ready.checks.parsers.sockets import parse_listeners

    ss = (Path(__file__).parent / "real_sockets" / "ss-tlnp_iproute2-6.1.txt").read_text()
    nodes = LocalNodes(tmp_path)
    claims = _claims(tmp_path, "j", nodes)
    devices = {n: [0] for n in NODES}
    with pytest.raises(TrainingError, match=r"node02: port 29500 .* python3 \(pid 25376\)"):
        PortClaims(tmp_path / "state").claim("j", NODES, lambda s: make_plan(s, "j", ["train"], devices),
                                             {"node02": parse_listeners(ss)}, on_nodes=claims)
    assert not (nodes.dir_of("node01") / "slot-0").exists()


def test_a_node_the_transport_cannot_reach_answers_as_unreachable_and_the_others_still_run():
    """A node cut off mid-job (paramiko's 'Timeout opening channel.' from its session): its reply is rc 255,
    which no claim parser accepts, and the release still reaches every other node (the launcher's own
    failure, not a traceback, is what the user sees)."""
    from types import SimpleNamespace

    from ascend_ready.fleet.sessions import SshSession
    from ascend_ready.training.job_ports import session_runner

    class CutTransport:  # paramiko's Transport once the node's link is down
        def set_keepalive(self, interval):
            pass

        def open_session(self, timeout=None):
            import paramiko

            raise paramiko.SSHException("Timeout opening channel.")  # paramiko/transport.py open_channel

    cut = SshSession("node02", SimpleNamespace(get_transport=CutTransport))
    ran = []

    class Up:
        def run(self, script, timeout_s):
            ran.append(script)
            return SimpleNamespace(rc=0, stdout="released\n", stderr="")

    replies = session_runner({"node01": Up(), "node02": cut})(["node01", "node02"], "echo released")
    assert replies["node01"] == (0, "released\n") and ran == ["echo released"]
    assert replies["node02"][0] == 255 and "Timeout opening channel." in replies["node02"][1]


class InterruptedNodes(LocalNodes):
    """A transport Ctrl-C interrupts on the first claim: after node01 answered, before node02 did."""

    def __call__(self, nodes, script):
        if self.calls or script.rstrip().endswith("echo released"):  # a later claim, or a release
            return super().__call__(nodes, script)
        super().__call__(nodes[:1], script)
        raise KeyboardInterrupt


def _left(tmp_path: Path) -> list[str]:
    """Every claim left on a node or in the controller's state."""
    return sorted(str(p.relative_to(tmp_path)) for p in (*tmp_path.glob("node0*/claims/slot-*"),
                                                         *tmp_path.glob("state/port-claims/*.json")))


@pytest.mark.parametrize("where", ["while the nodes answer", "at the held-port check",
                                   "at the plan's log line"])
def test_ctrl_c_anywhere_in_the_claim_leaves_no_claim_behind(tmp_path, monkeypatch, where):
    """Issue 25: a Ctrl-C inside the claim (between a node's grant and the launch holding `release`) gave no
    claim back; each node's then waited for the reaper. Now whatever was claimed is released."""
    monkeypatch.setenv("ASCEND_READY_STATE_DIR", str(tmp_path / "state"))
    from ascend_ready.checks.cluster import port_plan
    from ascend_ready.training.config import load_config

    cfg = load_config("tiny")
    hosts = {n: type("H", (), {"devices": [0, 1]})() for n in NODES}
    nodes = InterruptedNodes(tmp_path) if where == "while the nodes answer" else LocalNodes(tmp_path)
    claims = NodeClaims(nodes, "mine", directory=str(tmp_path / "claims"))
    log = lambda m: None  # noqa: E731
    if where == "at the held-port check":
        def interrupted(plan, listeners):
            assert _left(tmp_path) == ["node01/claims/slot-0", "node02/claims/slot-0"]  # both granted
            raise KeyboardInterrupt
        monkeypatch.setattr(port_plan, "refuse_held", interrupted)
    elif where == "at the plan's log line":
        def log(message):
            if not message.startswith("ports: slot "):
                return
            assert _left(tmp_path) == ["node01/claims/slot-0", "node02/claims/slot-0",
                                       "state/port-claims/mine.json"]
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        job_ports.claim("mine", hosts, {}, cfg, ["train"], rendezvous_port=29500, pinned_rendezvous=False,
                        on_nodes=claims, listeners={}, log=log)
    assert _left(tmp_path) == []
