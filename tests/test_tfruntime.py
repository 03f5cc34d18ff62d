"""labkit.runtime.tfruntime: what TensorFlow prints during injected failures goes to a file, counted (messages_to);
a strategy is not built on a cluster whose tasks do not answer (connect)."""
import logging
import os
import sys

import portpicker
import pytest

from labkit.runtime import tfruntime


def test_tensorflow_log_records_and_cpp_lines_go_to_the_file_and_stderr_comes_back(tmp_path, capfd):
    log_path = tmp_path / "tensorflow.log"
    with tfruntime.messages_to(log_path) as messages:
        logging.getLogger("tensorflow").error("Worker /job:worker/task:1 failed with UnavailableError: Socket closed")
        os.write(2, b"E0000 grpc: failed to connect to all addresses\n")
        print("Exception ignored in: <function AtomicFunction.__del__>", file=sys.stderr, flush=True)
    os.write(2, b"after the block\n")

    assert messages.lines == ["ERROR:tensorflow:Worker /job:worker/task:1 failed with UnavailableError: Socket closed",
                              "E0000 grpc: failed to connect to all addresses",
                              "Exception ignored in: <function AtomicFunction.__del__>"]
    assert log_path.read_text().splitlines() == messages.lines
    assert capfd.readouterr().err == "after the block\n"
    summary = messages.summary()
    assert f"3 lines, kept in {log_path}" in summary and "UnavailableError: Socket closed" in summary


def test_a_second_block_counts_only_its_own_lines_and_nothing_printed_says_so(tmp_path):
    log_path = tmp_path / "tensorflow.log"
    with tfruntime.messages_to(log_path):
        os.write(2, b"first block\n")
    with tfruntime.messages_to(log_path) as quiet:
        pass
    assert quiet.lines == [] and quiet.summary() == "TensorFlow printed nothing."
    assert log_path.read_text() == "first block\n"


def test_connecting_to_a_cluster_whose_task_does_not_answer_names_it_instead_of_hanging():
    tf = pytest.importorskip("tensorflow")
    nobody = portpicker.pick_unused_port()  # nothing listens there
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({"worker": [f"localhost:{nobody}"], "ps": [f"localhost:{nobody}"]}))
    with pytest.raises(TimeoutError, match=r"worker:0, ps:0 did not answer.*restart it"):
        tfruntime.connect(resolver, timeout=0.3)
