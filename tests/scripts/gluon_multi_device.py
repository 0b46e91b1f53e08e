"""A Gluon data-parallel training script for the project converter's tests (dualdl's own): the
batch split over several contexts with gluon.utils.split_and_load, one forward and one
per-sample loss per device, autograd.backward over the list, trainer.step(global batch);
optionally a BatchNorm (statistics per device)."""
import argparse

import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon import nn

parser = argparse.ArgumentParser(description='an MLP on MNIST over several devices')
parser.add_argument('--devices', type=int, default=2, help='CPU contexts the batch is split over')
parser.add_argument('--batch-size', type=int, default=20)
parser.add_argument('--batchnorm', action='store_true')
args = parser.parse_args()

ctx = [mx.cpu(i) for i in range(args.devices)]
net = nn.HybridSequential()
net.add(nn.Dense(32))
if args.batchnorm:
    net.add(nn.BatchNorm())
net.add(nn.Activation('tanh'), nn.Dense(10))
net.initialize(mx.init.Xavier(), ctx=ctx)
trainer = gluon.Trainer(net.collect_params(), 'sgd',
                        {'learning_rate': 0.1, 'momentum': 0.9, 'wd': 1e-4})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()


def flat(data, label):
    return data.reshape((-1,)).astype('float32') / 255, label


train_data = gluon.data.DataLoader(gluon.data.vision.MNIST('./data', train=True, transform=flat),
                                   batch_size=args.batch_size, shuffle=True, last_batch='discard')
for data, label in train_data:
    xs = gluon.utils.split_and_load(data, ctx)
    ys = gluon.utils.split_and_load(label, ctx)
    with autograd.record():
        losses = [loss_fn(net(x), y) for x, y in zip(xs, ys)]
    autograd.backward(losses)
    trainer.step(args.batch_size)
print('loss %.4f' % sum(l.mean().asscalar() for l in losses))
