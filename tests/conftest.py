import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# TensorFlow is the reference, so its graph must compute what its ops define. With oneDNN's graph
# rewrites on, TF 2.21 on an AVX-512 AMD EPYC (family 26) computes the layer-normalised LSTM cell
# of test_convert_lstm_contracts.py wrong inside a tf.function (0.16 off a float64 evaluation of the
# same math; eager TF, and the same tf.function with the rewrites off, agree with it to 1e-7). The
# plain (Eigen) kernels are TensorFlow's own; they are read before TensorFlow is first imported.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
sys.path.insert(0, os.path.dirname(__file__))
