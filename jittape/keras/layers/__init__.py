"""``jt.layers``: Keras-style layers and ``Input``, written with jittape's public ops
(``Sequential`` and ``Model`` are models: ``jt.Sequential``, ``jt.keras.Model``).

A layer creates its weights (``jt.Variable``) on its first call, from the shape of
that input (or at once, when the first layer of a ``Sequential`` is given
``input_shape``). Weights are named ``"<layer>/<weight>"`` (``v.name`` reads
``"dense/kernel:0"``), and listed in creation order: a ``Dense`` has kernel then
bias, a ``BatchNormalization`` gamma, beta, moving_mean, moving_variance; a model
lists its layers' weights layer by layer.

``layer(x, training=None)``: ``training`` reaches every sublayer; ``None`` means
inference, as at Keras' top level. Float inputs are converted to the layer's dtype
(``float32`` unless ``dtype=`` says otherwise), as Keras' autocasting does; ``Dense``
and ``BatchNormalization`` also take integer and bool inputs in that dtype, as Keras'
type promotion does (``Flatten`` keeps them as they are).

The ``"sigmoid"`` and ``"softmax"`` activations remember their inputs, so that a
crossentropy given their output computes from the logits, as Keras 3 does (see
``jt.losses``).

Regularization, as Keras 3: ``layer.losses`` lists the losses of the layer and its
sublayers, in this order: those added with ``add_loss`` and the activity penalties
(``activity_regularizer`` of each output, divided by the batch size) of the last
top-level call, which clears them when it starts; then the penalties of the weights
that have a regularizer, evaluated on their current values each time ``losses`` is read.
A frozen layer (``trainable=False``) and non-trainable weights add no weight penalty.
Inside a ``jt.function`` step the values are tensors of the trace, so a training step
returns ``loss + jt.add_n(model.losses)``.

Configs, as Keras 3: ``layer.get_config()`` gives the constructor arguments (nested
initializers, regularizers and constraints as Keras' config records),
``type(layer).from_config(config)`` rebuilds the layer, and ``serialize(layer)`` /
``deserialize(record, custom_objects)`` add the class name and the input shape the
layer was built for. Keras' own configs are read too.
"""

from __future__ import annotations

from .activations import ACTIVATIONS, get_activation, keras_logits
from .base import Layer
from .core import Activation, Dense, Dropout, Flatten
from .input_layer import Input, InputLayer
from .normalization import BatchNormalization
from .serialization import deserialize, serialize
# the layers that combine and reshape tensors
from .merging import (
    Add, Average, Concatenate, Dot, Maximum, Minimum, Multiply, Subtract, add, average,
    concatenate, dot, maximum, minimum, multiply, subtract,
)
from .reshaping import Identity, Lambda, Reshape
# image preprocessing
from .preprocessing import (
    CenterCrop, RandomBrightness, RandomContrast, RandomCrop, RandomFlip, RandomRotation,
    RandomTranslation, RandomZoom, Rescaling, Resizing,
)
# image-model layers
from .activations_layers import ELU, LeakyReLU, PReLU, ReLU, Softmax
from .regularization import (
    ActivityRegularization, AlphaDropout, GaussianDropout, GaussianNoise, SpatialDropout1D,
    SpatialDropout2D, SpatialDropout3D,
)
from .reshaping import (
    Cropping1D, Cropping2D, Cropping3D, Permute, RepeatVector, UpSampling1D, UpSampling2D,
    UpSampling3D, ZeroPadding1D, ZeroPadding2D, ZeroPadding3D,
)
# pooling
from .pooling import (
    AveragePooling1D, AveragePooling2D, AveragePooling3D, AvgPool1D, AvgPool2D, AvgPool3D,
    GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAveragePooling3D, GlobalAvgPool1D,
    GlobalAvgPool2D, GlobalAvgPool3D, GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPool3D,
    GlobalMaxPooling1D, GlobalMaxPooling2D, GlobalMaxPooling3D, MaxPool1D, MaxPool2D, MaxPool3D,
    MaxPooling1D, MaxPooling2D, MaxPooling3D,
)
# convolution
from .convolutional import (
    Conv1D, Conv1DTranspose, Conv2D, Conv2DTranspose, Conv3D, Conv3DTranspose, Convolution1D,
    Convolution1DTranspose, Convolution2D, Convolution2DTranspose, Convolution3D,
    Convolution3DTranspose, DepthwiseConv1D, DepthwiseConv2D, SeparableConv1D, SeparableConv2D,
    SeparableConvolution1D, SeparableConvolution2D,
)

__all__ = [
    "Layer", "Dense", "Dropout", "BatchNormalization", "Flatten", "Activation", "Input",
    "InputLayer", "get_activation", "ACTIVATIONS", "keras_logits", "serialize", "deserialize",
    "Add", "Average", "Concatenate", "Dot", "Identity", "Lambda", "Maximum", "Minimum",
    "Multiply", "Reshape", "Subtract", "add", "average", "concatenate", "dot", "maximum",
    "minimum", "multiply", "subtract",
    "CenterCrop", "RandomBrightness", "RandomContrast", "RandomCrop", "RandomFlip",
    "RandomRotation", "RandomTranslation", "RandomZoom", "Rescaling", "Resizing",
    # image-model layers
    "ELU", "LeakyReLU", "PReLU", "ReLU", "Softmax", "ActivityRegularization", "AlphaDropout",
    "GaussianDropout", "GaussianNoise", "SpatialDropout1D", "SpatialDropout2D",
    "SpatialDropout3D", "Cropping1D", "Cropping2D", "Cropping3D", "Permute", "RepeatVector",
    "UpSampling1D", "UpSampling2D", "UpSampling3D", "ZeroPadding1D", "ZeroPadding2D",
    "ZeroPadding3D",
    # pooling
    "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D",
    "AveragePooling3D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D",
    "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D", "MaxPool1D",
    "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D", "AvgPool3D", "GlobalMaxPool1D",
    "GlobalMaxPool2D", "GlobalMaxPool3D", "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D",
    # convolution
    "Conv1D", "Conv1DTranspose", "Conv2D", "Conv2DTranspose", "Conv3D", "Conv3DTranspose",
    "Convolution1D", "Convolution1DTranspose", "Convolution2D", "Convolution2DTranspose",
    "Convolution3D", "Convolution3DTranspose", "DepthwiseConv1D", "DepthwiseConv2D",
    "SeparableConv1D", "SeparableConv2D", "SeparableConvolution1D", "SeparableConvolution2D",
]

