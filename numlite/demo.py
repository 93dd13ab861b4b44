"""``make demo``: numlite's converter on a TensorFlow model with control flow.

A small image model refines its features in a ``tf.while_loop`` whose body branches with
``tf.cond`` and ``tf.switch_case`` (which the official converter refuses). numlite converts it
to a standard ``.tflite`` file; the demo runs that file in numlite's interpreter and in LiteRT
and compares both with TensorFlow.

Needs the dev extra (TensorFlow and ai-edge-litert); the interpreter itself needs neither.
"""

from __future__ import annotations

import time

from numlite.startup_logs import import_tensorflow, startup_noise_hidden


def build_module():
    """A tf.Module: conv features, then ``steps`` refinement iterations with branches."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)

    def weights(*shape, scale=0.3):
        return tf.Variable(rng.normal(0, scale, shape).astype(np.float32))

    class Refiner(tf.Module):
        def __init__(self):
            super().__init__()
            self.conv = weights(3, 3, 3, 8)
            self.mix = weights(8, 8)
            self.head = weights(8, 4, scale=1.0)

        @tf.function(input_signature=[tf.TensorSpec([None, 16, 16, 3], tf.float32, name="image"),
                                      tf.TensorSpec([], tf.int32, name="steps")])
        def __call__(self, image, steps):
            x = tf.nn.relu(tf.nn.conv2d(image, self.conv, strides=2, padding="SAME"))
            h = tf.reduce_mean(x, axis=[1, 2])

            def body(i, h):
                h = tf.tanh(tf.matmul(h, self.mix))
                h = tf.cond(tf.reduce_sum(h) > 0, lambda: h * 0.9, lambda: h + 0.1)
                h = tf.switch_case(i % 3, [lambda: h, lambda: tf.nn.relu(h), lambda: -h])
                return i + 1, h

            _, h = tf.while_loop(lambda i, h: i < steps, body, (0, h))
            return {"logits": tf.matmul(h, self.head)}

    return Refiner()


def _timed(run, repeat: int = 50) -> float:
    run()
    start = time.perf_counter()
    for _ in range(repeat):
        run()
    return (time.perf_counter() - start) / repeat * 1e3


def main() -> None:
    import numpy as np

    tf = import_tensorflow()  # before anything imports it: TensorFlow's start-up notices hidden
    with startup_noise_hidden():
        from ai_edge_litert.interpreter import Interpreter as LiteRTInterpreter

    import numlite

    module = build_module()
    converter = numlite.TFLiteConverter.from_concrete_functions([module.__call__.get_concrete_function()], module)
    tflite_model = converter.convert()
    print("numlite converted the model:")
    print("  " + str(converter.report).replace("\n", "\n  "))
    print()

    image = np.random.default_rng(1).uniform(0, 1, (2, 16, 16, 3)).astype(np.float32)
    worst = 0.0
    for steps in (0, 3, 8):
        expected = module(tf.constant(image), tf.constant(steps))["logits"].numpy()
        print(f"steps={steps}: TensorFlow logits[0] = {np.array2string(expected[0], precision=4)}")
        for name, cls in [("numlite", numlite.Interpreter), ("LiteRT", LiteRTInterpreter)]:
            with startup_noise_hidden():  # LiteRT announces its XNNPACK delegate on stderr
                interpreter = cls(model_content=tflite_model)
                runner = interpreter.get_signature_runner()
                got = runner(image=image, steps=np.array(steps, np.int32))["logits"]
            diff = float(np.abs(got - expected).max())
            worst = max(worst, diff)
            ms = _timed(lambda: runner(image=image, steps=np.array(steps, np.int32)))
            print(f"  {name:8s} max |difference from TF| = {diff:.2g}  ({ms:.3f} ms per run)")
    print()
    print(f"largest difference from TensorFlow: {worst:.2g} "
          f"({'within' if worst <= 1e-5 else 'OUTSIDE'} the 1e-5 tolerance)")


if __name__ == "__main__":
    main()
