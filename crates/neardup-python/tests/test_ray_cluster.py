"""neardup.ray on a Ray cluster of two nodes (ray.cluster_utils.Cluster, one CPU each,
tasks spread over both), and with workers killed mid-run: the answer is still `neardup
dedup`'s, byte for byte."""

import os

import pytest

from ray_support import KJV, PLANTED, cli_args, cli_dedup, import_ray, write_tricky

ray = import_ray()
import neardup.ray as nray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def two_nodes():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def record_nodes(folder):
    """A hook run as each task starts: it leaves a file named after its node."""

    def hook(stage, index):
        import ray

        open(os.path.join(folder, ray.get_runtime_context().get_node_id()), "a").close()

    return hook


def kill_once_per_stage(folder, stages):
    """A hook that kills (SIGKILL) the worker running the first task of each of `stages`,
    once: the retried task finds the mark and goes on."""

    def hook(stage, index):
        import signal

        if stage not in stages:
            return
        try:
            fd = os.open(os.path.join(folder, f"killed-{stage}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)

    return hook


def run(source, tmp, **kw):
    clusters, kept = tmp / "ray-clusters.jsonl", tmp / "ray-deduplicated.jsonl"
    nray.dedup(str(source), clusters=str(clusters), deduplicated=str(kept), **kw)
    return clusters.read_bytes(), kept.read_bytes()


@pytest.fixture(scope="module")
def nodes_seen(tmp_path_factory):
    return tmp_path_factory.mktemp("nodes")


@pytest.mark.parametrize("source,threshold", [(PLANTED, 0.8), (KJV, 0.5), ("tricky", 0.8)])
def test_two_nodes_equal_cli(tmp_path, nodes_seen, source, threshold):
    if source == "tricky":
        source = write_tricky(tmp_path)["jsonl"]
    want = cli_dedup(source, tmp_path, *cli_args(threshold))
    got = run(source, tmp_path, threshold=threshold, unit_bytes=300_000, partitions=4,
              _fault=record_nodes(str(nodes_seen)))
    assert got == want


def test_both_nodes_ran_tasks(nodes_seen):
    # Ray spreads the reading tasks, best effort; over the runs above, both nodes worked.
    assert len(os.listdir(nodes_seen)) == 2


def test_worker_killed_mid_run(tmp_path):
    """A worker killed in each stage (signatures, nodes, buckets, verification, cluster
    rows, second pass): Ray retries its task and the answer is unchanged."""
    want = cli_dedup(PLANTED, tmp_path, *cli_args(0.7, "longest"))
    marks = tmp_path / "marks"
    marks.mkdir()
    stages = {"sign", "nodes", "buckets", "near", "verify", "expand", "pick"}
    got = run(PLANTED, tmp_path, threshold=0.7, keep="longest", unit_bytes=400_000, partitions=3,
              _fault=kill_once_per_stage(str(marks), stages))
    assert got == want
    assert sorted(os.listdir(marks)) == sorted(f"killed-{s}" for s in stages)
