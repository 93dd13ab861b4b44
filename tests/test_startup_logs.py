"""numlite's converter (so `numlite convert` and `make demo`) prints no TensorFlow/LiteRT start-up noise.

The noise is whatever TensorFlow and LiteRT print at start-up on this machine (absl's pre-init
warning, cudart_stub's missing CUDA drivers, cuInit's failure, the CPU feature guard, oneDNN's
notice, LiteRT's XNNPACK line), looked for by the words they contain, not by numlite's own filter.
"""

import os
import re
import subprocess
import sys

from numlite.startup_logs import startup_noise_hidden

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOISE_WORDS = re.compile(r"oneDNN|cuda|cuInit|absl::InitializeLog|cpu_feature_guard|XNNPACK|TensorRT", re.IGNORECASE)


# A user's script: numlite's converter first, then the user's TensorFlow code, converted.
# (`make demo` goes through the same import; it costs a few seconds more than this.)
SCRIPT = """
import numlite
converter_class = numlite.TFLiteConverter
import tensorflow as tf
f = tf.function(lambda x: tf.nn.relu(x) + 1.0, input_signature=[tf.TensorSpec([2], tf.float32)])
data = converter_class.from_concrete_functions([f.get_concrete_function()]).convert()
interpreter = numlite.Interpreter(model_content=data)
print(interpreter.get_signature_runner()(x=tf.constant([-1.0, 2.0]).numpy()))
"""


def test_converter_prints_no_startup_noise():
    env = dict(os.environ)
    # conftest.py sets both for the suite; numlite must be quiet by itself, oneDNN on or off.
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "array([1., 3.], dtype=float32)" in done.stdout, done.stdout  # relu([-1, 2]) + 1, exact
    noisy = [line for line in done.stderr.splitlines() if NOISE_WORDS.search(line)]
    assert noisy == [], done.stderr
    assert done.stderr.strip() == "", done.stderr


def test_other_native_stderr_lines_are_kept(capfd):
    # Only the known notices go: anything else written to descriptor 2 meanwhile comes out after.
    with startup_noise_hidden():
        os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n")
        os.write(2, b"I0000 00:00:1.0 1 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
                    b"GPU will not be used.\n")
        os.write(2, b"E0000 00:00:1.0 1 some_kernel.cc:7] a real error\n")
        os.write(2, b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n")
        os.write(2, b"To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow "
                    b"with the appropriate compiler flags.\n")
        os.write(2, b"a last line without a newline")
    err = capfd.readouterr().err
    assert err == "E0000 00:00:1.0 1 some_kernel.cc:7] a real error\na last line without a newline"
