"""The project converter's table for gluoncv and gluon.data.vision (model zoo, transforms, CIFAR,
schedulers): same form as
:mod:`dualdl.port.project.table` (``API``: qualified Gluon name -> replacement expression;
``METHODS``: method name -> (kind, target); ``TODO``: prefix -> why not converted), merged there.

A model zoo factory becomes ``g2t.zoo('<factory>')``: the call keeps its arguments and builds
the torch module :mod:`dualdl.port.project.zoo` translated for them at conversion time."""
from __future__ import annotations

from typing import Dict, Tuple

_T = "mxnet.gluon.data.vision.transforms."
_VISION = "mxnet.gluon.model_zoo.vision."
#: the factory functions of ``gluon.model_zoo.vision`` (MXNet 1.9.1's ``get_model`` table)
VISION_FACTORIES = (
    "resnet18_v1", "resnet34_v1", "resnet50_v1", "resnet101_v1", "resnet152_v1", "resnet18_v2",
    "resnet34_v2", "resnet50_v2", "resnet101_v2", "resnet152_v2", "vgg11", "vgg13", "vgg16",
    "vgg19", "vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn", "alexnet", "densenet121",
    "densenet161", "densenet169", "densenet201", "squeezenet1_0", "squeezenet1_1", "inception_v3",
    "mobilenet1_0", "mobilenet0_75", "mobilenet0_5", "mobilenet0_25", "mobilenet_v2_1_0",
    "mobilenet_v2_0_75", "mobilenet_v2_0_5", "mobilenet_v2_0_25")
#: the zoo factories whose calls are translated models (their ZooEntry is in zoo.py)
ZOO_FACTORIES = ("gluoncv.model_zoo.get_model", _VISION + "get_model") + tuple(
    _VISION + f for f in VISION_FACTORIES)

API: Dict[str, str] = {
    "mxnet.Context": "torch.device",
    # transforms (gluon.data.vision and gluoncv.data)
    _T + "Compose": "g2t.Compose", _T + "ToTensor": "g2t.ToTensor",
    _T + "Normalize": "g2t.Normalize", _T + "Cast": "g2t.Cast",
    _T + "RandomFlipLeftRight": "g2t.RandomFlipLeftRight",
    "gluoncv.data.transforms.RandomCrop": "g2t.RandomCrop",
    "gluoncv.data.transforms.block.RandomCrop": "g2t.RandomCrop",
    # datasets
    "mxnet.gluon.data.vision.CIFAR10": "g2t.CIFAR10",
    "mxnet.gluon.data.vision.CIFAR100": "g2t.CIFAR100",
    # gluoncv utilities
    "gluoncv.utils.makedirs": "g2t.makedirs", "gluoncv.utils.check_version": "g2t.check_version",
    "gluoncv.utils.TrainingHistory": "g2t.TrainingHistory",
    "gluoncv.utils.plot_history.TrainingHistory": "g2t.TrainingHistory",
    "gluoncv.utils.LRScheduler": "g2t.LRScheduler",
    "gluoncv.utils.LRSequential": "g2t.LRSequential",
    "gluoncv.utils.lr_scheduler.LRScheduler": "g2t.LRScheduler",
    "gluoncv.utils.lr_scheduler.LRSequential": "g2t.LRSequential",
}
API.update({q: f"g2t.zoo({q!r})" for q in ZOO_FACTORIES})
API["gluoncv.model_zoo.model_zoo.get_model"] = API["gluoncv.model_zoo.get_model"]
METHODS: Dict[str, Tuple[str, str]] = {}
TODO: Dict[str, str] = {
    "gluoncv.model_zoo": "a gluoncv model: call gluoncv.model_zoo.get_model(name, ...) (translated "
                         "at conversion time) or translate it with dualdl translate",
    _T: "this Gluon transform has no torch twin in gluon2torch yet",
}
