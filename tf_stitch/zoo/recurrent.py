"""Recurrent models (Keras LSTM, GRU, bidirectional, stacked, SimpleRNN, ConvLSTM) and a few
classic small networks (MLP, LeNet-5, a small U-Net), with random weights."""

from __future__ import annotations

from typing import Any

from tf_stitch.zoo.entry import ZooEntry, keras_entry

STEPS, FEATURES, UNITS = 50, 64, 256


def _sequence_model(name: str, *cores: Any) -> Any:
    import keras
    from keras import layers

    x = inp = keras.Input((STEPS, FEATURES), name="sequence")
    for core in cores:
        x = core(x)
    return keras.Model(inp, layers.Dense(10, activation="softmax", name="head")(x), name=name)


def _recurrent() -> dict[str, tuple[str, Any]]:
    def lstm() -> Any:
        from keras import layers

        return _sequence_model("lstm", layers.LSTM(UNITS, name="lstm"))

    def gru() -> Any:
        from keras import layers

        return _sequence_model("gru", layers.GRU(UNITS, name="gru"))

    def bilstm() -> Any:
        from keras import layers

        return _sequence_model("bilstm", layers.Bidirectional(layers.LSTM(UNITS), name="bilstm"))

    def stacked_lstm() -> Any:
        from keras import layers

        return _sequence_model(
            "stacked_lstm",
            layers.LSTM(UNITS, return_sequences=True, name="lstm_1"),
            layers.LSTM(UNITS, name="lstm_2"),
        )

    def simple_rnn() -> Any:
        from keras import layers

        return _sequence_model("simple_rnn", layers.SimpleRNN(UNITS, name="rnn"))

    return {
        "lstm": (f"LSTM {UNITS} units over {STEPS} steps of {FEATURES} features", lstm),
        "gru": (f"GRU {UNITS} units over {STEPS} steps", gru),
        "bilstm": (f"bidirectional LSTM 2x{UNITS} units over {STEPS} steps", bilstm),
        "stacked_lstm": (f"two stacked LSTMs of {UNITS} units over {STEPS} steps", stacked_lstm),
        "simple_rnn": (f"SimpleRNN {UNITS} units over {STEPS} steps", simple_rnn),
    }


def _conv_lstm() -> Any:
    import keras
    from keras import layers

    inp = keras.Input((10, 32, 32, 3), name="frames")
    x = layers.ConvLSTM2D(16, 3, padding="same", name="conv_lstm")(inp)
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    return keras.Model(inp, layers.Dense(10, name="head")(x), name="conv_lstm")


def _mlp() -> Any:
    import keras
    from keras import layers

    x = inp = keras.Input((784,), name="pixels")
    for i in range(3):
        x = layers.Dense(1024, activation="relu", name=f"dense_{i}")(x)
    return keras.Model(inp, layers.Dense(10, activation="softmax", name="head")(x), name="mlp")


def _lenet5() -> Any:
    import keras
    from keras import layers

    inp = keras.Input((32, 32, 1), name="digit")
    x = layers.Conv2D(6, 5, activation="tanh", name="c1")(inp)
    x = layers.AveragePooling2D(2, name="s2")(x)
    x = layers.Conv2D(16, 5, activation="tanh", name="c3")(x)
    x = layers.AveragePooling2D(2, name="s4")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(120, activation="tanh", name="c5")(x)
    x = layers.Dense(84, activation="tanh", name="f6")(x)
    return keras.Model(inp, layers.Dense(10, activation="softmax", name="out")(x), name="lenet5")


def _unet_small() -> Any:
    import keras
    from keras import layers

    inp = keras.Input((128, 128, 3), name="image")
    x, skips = inp, []
    for i, width in enumerate((32, 64, 128)):
        x = layers.Conv2D(width, 3, padding="same", activation="relu", name=f"down{i}_a")(x)
        x = layers.Conv2D(width, 3, padding="same", activation="relu", name=f"down{i}_b")(x)
        skips.append(x)
        x = layers.MaxPooling2D(2, name=f"pool{i}")(x)
    x = layers.Conv2D(256, 3, padding="same", activation="relu", name="bottleneck")(x)
    for i, width in reversed(list(enumerate((32, 64, 128)))):
        x = layers.Conv2DTranspose(width, 2, strides=2, name=f"up{i}")(x)
        x = layers.Concatenate(name=f"skip{i}")([x, skips[i]])
        x = layers.Conv2D(width, 3, padding="same", activation="relu", name=f"up{i}_conv")(x)
    return keras.Model(inp, layers.Conv2D(2, 1, name="mask")(x), name="unet_small")


def entries() -> list[ZooEntry]:
    out = [
        keras_entry(name, "recurrent", text, [(STEPS, FEATURES)], build)
        for name, (text, build) in _recurrent().items()
    ]
    out.append(
        keras_entry(
            "conv_lstm",
            "recurrent",
            "ConvLSTM2D, 16 filters, over 10 frames of 32x32x3",
            [(10, 32, 32, 3)],
            _conv_lstm,
        )
    )
    out += [
        keras_entry("mlp", "classic", "MLP 784-1024-1024-1024-10", [(784,)], _mlp, batch=32),
        keras_entry(
            "lenet5", "classic", "LeNet-5 on 32x32 digits", [(32, 32, 1)], _lenet5, batch=32
        ),
        keras_entry(
            "unet_small",
            "classic",
            "a 3-level U-Net on 128x128 images",
            [(128, 128, 3)],
            _unet_small,
        ),
    ]
    return out
