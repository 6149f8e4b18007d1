"""Every `keras.applications` architecture, with random weights (`weights=None`) at its
default input resolution and with its 1000-class head."""

from __future__ import annotations

from typing import Any

from tf_stitch.zoo.entry import ZooEntry, keras_entry

# The default input size of each architecture (its paper's resolution, as Keras documents it).
RESOLUTION = {
    "ConvNeXtBase": 224,
    "ConvNeXtLarge": 224,
    "ConvNeXtSmall": 224,
    "ConvNeXtTiny": 224,
    "ConvNeXtXLarge": 224,
    "DenseNet121": 224,
    "DenseNet169": 224,
    "DenseNet201": 224,
    "EfficientNetB0": 224,
    "EfficientNetB1": 240,
    "EfficientNetB2": 260,
    "EfficientNetB3": 300,
    "EfficientNetB4": 380,
    "EfficientNetB5": 456,
    "EfficientNetB6": 528,
    "EfficientNetB7": 600,
    "EfficientNetV2B0": 224,
    "EfficientNetV2B1": 240,
    "EfficientNetV2B2": 260,
    "EfficientNetV2B3": 300,
    "EfficientNetV2L": 480,
    "EfficientNetV2M": 480,
    "EfficientNetV2S": 384,
    "InceptionResNetV2": 299,
    "InceptionV3": 299,
    "MobileNet": 224,
    "MobileNetV2": 224,
    "MobileNetV3Large": 224,
    "MobileNetV3Small": 224,
    "NASNetLarge": 331,
    "NASNetMobile": 224,
    "ResNet101": 224,
    "ResNet101V2": 224,
    "ResNet152": 224,
    "ResNet152V2": 224,
    "ResNet50": 224,
    "ResNet50V2": 224,
    "VGG16": 224,
    "VGG19": 224,
    "Xception": 299,
}


def _builder(arch: str, size: int) -> Any:
    def build() -> Any:
        import keras

        return getattr(keras.applications, arch)(weights=None, input_shape=(size, size, 3))

    return build


def entries() -> list[ZooEntry]:
    return [
        keras_entry(
            arch,
            "keras.applications",
            f"keras.applications.{arch}, {size}x{size} RGB, 1000 classes",
            [(size, size, 3)],
            _builder(arch, size),
        )
        for arch, size in RESOLUTION.items()
    ]
