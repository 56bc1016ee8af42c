"""The rules by structure for errnos, torch.distributed's store, TLS and HTTP fetches (issue 31, round 10 B),
on real lines: the dev logs they were written from (data/corpus/dev/, cited in its manifest.yml) and
the examples the knowledge base quotes from its sources. Each names its cause with a fix; none fires on a
warning line, on a line a more specific entry names, or on the healthy corpus; a peer's reset or a lost store
follows a fault found elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_ready.checks.diagnose import diagnose_paths
from ascend_ready.checks.diagnose.model import load_knowledge_base

CORPUS = Path(__file__).with_name("data") / "corpus"
DEV = CORPUS / "dev"

#: dev log -> "<id> <code>" of its one finding
NAMED = {
    "enomem-dataloader-fork_resnext-pytorch-5.log": "cannot-allocate-memory ENOMEM",
    "enomem-mlock-limit_llama-cpp-python-618.log": "cannot-allocate-memory ENOMEM",
    "econnreset-download-aborted_fastchat-1951.log": "connection-reset-by-peer ECONNRESET",
    "econnreset-nccl-recv_nccl-2076.log": "connection-reset-by-peer ECONNRESET",
    "epipe-pool-worker_pointnet2-semantic-8.log": "broken-pipe EPIPE",
    "etimedout-hub-connect_dgx-vllm-16.log": "connection-timed-out ETIMEDOUT",
    "enetunreach-ipv6-host_cloudflare-ddns-189.log": "network-unreachable ENETUNREACH",
    "eaddrnotavail-bind-foreign-ip_shadowsocks-412.log": "address-not-available EADDRNOTAVAIL",
    "eaddrnotavail-nat-ip_fastdfs-175.log": "address-not-available EADDRNOTAVAIL",
    "eio-checkpoint-write_slime-326.log": "input-output-error EIO",
    "erofs-hf-cache-home_wyoming-faster-whisper-27.log": "read-only-filesystem EROFS",
    "edquot-lustre-scratch_hostg-7.log": "disk-quota-exceeded EDQUOT",
    "eagain-openblas-nproc_nnunet-1343.log": "thread-limit-reached EAGAIN",
    "eagain-hdf5-lock_compas-683.log": "resource-temporarily-unavailable EAGAIN",
    "ebusy-nfs-rmtree_modelscope-104.log": "device-or-resource-busy EBUSY",
    "estale-shared-cache_ms-swift-6695.log": "stale-file-handle ESTALE",
    "enametoolong-prompt-filename_jemma-6.log": "file-name-too-long ENAMETOOLONG",
    "eisdir-checkpoint-dir_fastmri-83.log": "is-a-directory EISDIR",
    "enotdir-file-as-model-dir_musictransformer-19.log": "not-a-directory ENOTDIR",
    "c10d-store-reset-rank0-gone_llamafactory-1808.log": "c10d-store-connection-lost c10d store",
    "c10d-store-clients-missing_megatron-lm-782.log": "c10d-store-clients-missing store 1/2",
    "c10d-store-clients-joined_visual-rft-123.log": "c10d-store-clients-missing store 1/3",
    "c10d-store-socket-timeout_pai-megatron-patch-468.log": "c10d-store-wait-timeout store wait",
    "tls-self-signed-chain_stable-virtual-camera-23.log":
        "tls-certificate-untrusted CERTIFICATE_VERIFY_FAILED",
    "tls-eof-handshake_entity-extractor-70.log": "tls-connection-cut TLS handshake",
    "proxy-407-auth_huggingface-hub-2625.log": "http-proxy-failed ProxyError",
    "http-read-timeout_huggingface-hub-1718.log": "http-fetch-failed cdn-lfs.huggingface.co",
    "hub-gated-repo_pulid-97.log": "hub-gated-repo gated repo",
    "hub-id-on-modelscope_llamafactory-3058.log": "hub-repo-not-found repo not found",
    "hub-repo-id-from-missing-path_lmops-71.log": "hub-repo-id-invalid repo id",
    "hub-rate-limited_transformers-21129.log": "http-rate-limited HTTP 429",
    "http-entry-not-found_maggie-5.log": "http-client-error HTTP 404",
    "http-500-api_shell-gpt-36.log": "http-server-error HTTP 500",
}
OURS = {named.split(" ")[0] for named in NAMED.values()}


def _example(entry_id: str, needle: str) -> str:
    """A line the knowledge base quotes from its sources for an entry (the one containing `needle`)."""
    entry = next(e for e in load_knowledge_base().entries if e.id == entry_id)
    return next(x for x in entry.examples if needle in x)


def _diagnose(tmp_path: Path, lines: list[str]):
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose_paths([log])


def test_every_dev_log_of_the_round_is_here():
    assert all((DEV / name).is_file() for name in NAMED)


@pytest.mark.parametrize("name", sorted(NAMED))
def test_a_rule_names_its_real_log_as_the_cause_with_a_fix(name):
    report = diagnose_paths([DEV / name])
    assert [f"{f.id} {f.code}" for f in report.findings] == [NAMED[name]]
    finding = report.findings[0]
    assert finding.role == "cause" and finding.fix and finding.causes


def test_a_general_rule_names_no_cause_on_a_warning_line(tmp_path):
    # torch's `[W ...]` TCPStore lines at a rank's shutdown (tdrussell/diffusion-pipe#333,
    # pytorch/pytorch#153586)
    for needle in ("[W729", "[W514"):
        assert _diagnose(tmp_path, [_example("c10d-store-connection-lost", needle)]).findings == []


@pytest.mark.parametrize(("entry_id", "needle"), [
    ("gloo-peer-closed", "Connection reset by peer"),  # gloo's pair.cc names the reset
    ("c10d-connect-timeout", "errno: 110"),  # c10d's client socket to the store (zai-org/ChatGLM-6B#1476)
    ("name-resolution-failed", "Max retries exceeded"),  # the MaxRetryError names DNS (yerfor/GeneFace#283)
    ("static-tls-preload", "static TLS block"),  # not ENOMEM: the loader's static TLS
    ("hub-repo-not-found", "modelscope.cn"),  # a ModelScope 404 is the repo, not any client error
    ("http-rate-limited", "429 Client Error"),
])
def test_the_more_specific_entry_on_the_line_stands_alone(tmp_path, entry_id, needle):
    report = _diagnose(tmp_path, [_example(entry_id, needle)])
    assert [f.id for f in report.findings] == [entry_id]


def test_no_rule_of_the_round_fires_on_healthy_logs():
    healthy = sorted((CORPUS / "healthy").glob("*.log")) + sorted(CORPUS.parent.glob("clean_*.log"))
    assert healthy
    for log in healthy:
        assert not [f.id for f in diagnose_paths([log]).findings if f.id in OURS], log.name


def test_a_lost_store_and_a_peers_reset_follow_the_fault_found_first():
    # the host memory a DataLoader fork could not get (ResNeXt.pytorch#5) is the fault; the store connection
    # rank 3 lost (LlamaFactory#1808) and a reset connection (FastChat#1951) are what others saw after it
    report = diagnose_paths([DEV / "enomem-dataloader-fork_resnext-pytorch-5.log",
                             DEV / "c10d-store-reset-rank0-gone_llamafactory-1808.log",
                             DEV / "econnreset-download-aborted_fastchat-1951.log"])
    roles = {f.id: (f.role, f.caused_by) for f in report.findings}
    assert roles["cannot-allocate-memory"] == ("cause", None)
    assert roles["c10d-store-connection-lost"][0] == "consequence"
    assert roles["connection-reset-by-peer"] == ("consequence", "ENOMEM")


def test_the_store_reset_is_not_named_twice_as_a_bare_connection_reset(tmp_path):
    lines = (DEV / "c10d-store-reset-rank0-gone_llamafactory-1808.log").read_text().splitlines()
    line = next(x for x in lines if "store->get" in x)
    assert "Connection reset by peer" in line
    assert [f.id for f in _diagnose(tmp_path, [line]).findings] == ["c10d-store-connection-lost"]
