"""A Gluon CIFAR-10 training script for the project converter's tests (dualdl's own, written for
tests/test_project_vision.py in the style of public gluoncv classification scripts): a gluoncv
model-zoo ResNet, CIFAR10 through gluon.data with random crop + flip, ToTensor and Normalize,
nag with a MultiFactorScheduler, split_and_load over the contexts, autograd.record, a metric,
an evaluation pass each epoch and checkpoints."""
import argparse
import logging
import os

import numpy as np
import mxnet as mx
from mxnet import autograd as ag
from mxnet import gluon
from mxnet.gluon.data.vision import transforms

from gluoncv.model_zoo import get_model
from gluoncv.utils import makedirs
from gluoncv.data import transforms as gcv_transforms

parser = argparse.ArgumentParser(description='a small gluoncv ResNet on CIFAR-10')
parser.add_argument('--batch-size', type=int, default=8)
parser.add_argument('--epochs', type=int, default=2)
parser.add_argument('--lr', type=float, default=0.1)
parser.add_argument('--num-gpus', type=int, default=0)
parser.add_argument('--save-dir', type=str, default='params')
opt = parser.parse_args()

logging.basicConfig(level=logging.INFO)

mean, std = [0.4914, 0.4822, 0.4465], [0.2023, 0.1994, 0.2010]
transform_train = transforms.Compose([
    gcv_transforms.RandomCrop(32, pad=4),
    transforms.RandomFlipLeftRight(),
    transforms.ToTensor(),
    transforms.Normalize(mean, std),
])
transform_test = transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean, std)])


def evaluate(net, ctx, val_data):
    metric = mx.metric.Accuracy()
    for batch in val_data:
        data = gluon.utils.split_and_load(batch[0], ctx_list=ctx, batch_axis=0)
        label = gluon.utils.split_and_load(batch[1], ctx_list=ctx, batch_axis=0)
        metric.update(label, [net(x) for x in data])
    return metric.get()[1]


def main():
    ctx = [mx.gpu(i) for i in range(opt.num_gpus)] or [mx.cpu()]
    batch_size = opt.batch_size * max(1, opt.num_gpus)
    net = get_model('cifar_resnet20_v1', classes=10)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    train_data = gluon.data.DataLoader(
        gluon.data.vision.CIFAR10(root='./data/cifar10', train=True).transform_first(transform_train),
        batch_size=batch_size, shuffle=True, last_batch='discard')
    val_data = gluon.data.DataLoader(
        gluon.data.vision.CIFAR10(root='./data/cifar10', train=False).transform_first(transform_test),
        batch_size=batch_size, shuffle=False)
    steps = len(train_data)
    schedule = mx.lr_scheduler.MultiFactorScheduler(step=[steps, steps + 2], factor=0.5)
    trainer = gluon.Trainer(net.collect_params(), 'nag',
                            {'learning_rate': opt.lr, 'momentum': 0.9, 'wd': 1e-4,
                             'lr_scheduler': schedule})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    train_metric = mx.metric.Accuracy()
    makedirs(opt.save_dir)
    for epoch in range(opt.epochs):
        train_metric.reset()
        train_loss = 0.0
        for batch in train_data:
            data = gluon.utils.split_and_load(batch[0], ctx_list=ctx, batch_axis=0)
            label = gluon.utils.split_and_load(batch[1], ctx_list=ctx, batch_axis=0)
            with ag.record():
                output = [net(x) for x in data]
                loss = [loss_fn(yhat, y) for yhat, y in zip(output, label)]
            for l in loss:
                l.backward()
            trainer.step(batch_size)
            train_loss += sum([l.sum().asscalar() for l in loss])
            train_metric.update(label, output)
        val_acc = evaluate(net, ctx, val_data)
        logging.info('[Epoch %d] train=%.3f val=%.3f loss=%.4f lr=%g', epoch, train_metric.get()[1],
                     val_acc, train_loss / (batch_size * steps), trainer.learning_rate)
        net.save_parameters(os.path.join(opt.save_dir, 'cifar-resnet20-%d.params' % epoch))


if __name__ == '__main__':
    main()
