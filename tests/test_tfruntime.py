"""labkit.runtime.tfruntime.messages_to: what TensorFlow prints during injected failures goes to a file, counted."""
import logging
import os
import sys

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
