"""A Gluon CNN training script for the project converter's tests (dualdl's own): Conv2D,
BatchNorm, MaxPool2D, a Dense head with deferred shapes, nag with a FactorScheduler, MNIST
images as CHW floats, mx.nd.waitall."""
import argparse

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon import nn

parser = argparse.ArgumentParser(description='a small Gluon CNN on MNIST')
parser.add_argument('--batch-size', type=int, default=32)
parser.add_argument('--epochs', type=int, default=1)
args = parser.parse_args()

net = nn.HybridSequential()
net.add(nn.Conv2D(8, kernel_size=3, padding=1),
        nn.BatchNorm(),
        nn.Activation('relu'),
        nn.MaxPool2D(pool_size=2),
        nn.Dense(10))
net.hybridize()


def to_chw(data, label):
    return data.astype(np.float32).transpose((2, 0, 1)) / 255, label


train_data = gluon.data.DataLoader(
    gluon.data.vision.MNIST('./data', train=True, transform=to_chw),
    batch_size=args.batch_size, shuffle=True, last_batch='discard')

ctx = mx.cpu()
net.initialize(mx.init.Xavier(), ctx=ctx)
schedule = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5)
trainer = gluon.Trainer(net.collect_params(), 'nag',
                        {'learning_rate': 0.01, 'momentum': 0.9, 'wd': 1e-4,
                         'lr_scheduler': schedule})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
for epoch in range(args.epochs):
    for data, label in train_data:
        with autograd.record():
            loss = loss_fn(net(data.as_in_context(ctx)), label.as_in_context(ctx))
        loss.backward()
        trainer.step(args.batch_size)
    mx.nd.waitall()
    print('epoch %d: lr %g, loss %.4f' % (epoch, trainer.learning_rate, loss.mean().asscalar()))
