"""neardup.ray on a Ray cluster of two nodes (ray.cluster_utils.Cluster: two nodes of one
CPU each that run the tasks, beside a head that runs the driver), with workers killed
mid-run, and with a node lost mid-run: the answer is still `neardup dedup`'s, byte for
byte."""

import collections
import os
import threading
import time

import pytest

from ray_support import KJV, PLANTED, cli_args, cli_dedup, import_ray, write_tricky

ray = import_ray()
import neardup.ray as nray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402


@pytest.fixture(scope="module")
def two_nodes():
    # Every object goes through the object store (none is small enough to travel inside
    # the task's reply), so that objects really move between the nodes, and a node lost
    # loses the objects it made. A fetch that finds no node holding its object gives up
    # after 30 s instead of Ray's 10 minutes: when a node lost leaves Ray unable to rebuild
    # an object, neardup.ray runs the job again sooner.
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False,
        "_system_config": {"max_direct_call_object_size": 100, "fetch_fail_timeout_milliseconds": 30_000}})
    cluster.add_node(num_cpus=1)
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(autouse=True)
def on_cluster(two_nodes):
    return two_nodes


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
    # The head runs no task; over the runs above, both nodes worked.
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


def test_node_lost_mid_run(tmp_path, two_nodes):
    """The node that made most of the node tables is removed while the buckets are being
    compared: Ray retries the tasks that were running there and runs again the tasks
    whose objects were lost with it (signatures, nodes), and the answer is unchanged.
    Runs last: it leaves one node."""
    want = cli_dedup(PLANTED, tmp_path, *cli_args(0.8))
    log, mark = tmp_path / "log", tmp_path / "buckets"

    def hook(stage, index):
        import ray

        with open(log, "a") as f:
            f.write(f"{stage} {ray.get_runtime_context().get_node_id()}\n")
        if stage == "buckets" and not mark.exists():
            mark.touch()
            time.sleep(3)

    def remove():
        while not mark.exists():
            time.sleep(0.01)
        made = collections.Counter(line.split()[1] for line in log.read_text().splitlines() if line.startswith("nodes "))
        busiest = made.most_common(1)[0][0]
        node = next(n for n in two_nodes.list_all_nodes() if n.node_id == busiest)
        two_nodes.remove_node(node)

    remover = threading.Thread(target=remove)
    remover.start()
    got = run(PLANTED, tmp_path, unit_bytes=200_000, partitions=4, _fault=hook)
    remover.join()
    assert got == want
    ran = collections.Counter(line.split()[0] for line in log.read_text().splitlines())
    assert ran["nodes"] > 4, f"no task ran again: {ran}"
