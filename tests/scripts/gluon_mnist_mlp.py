"""A Gluon training script for the project converter's tests (dualdl's own, written for
tests/test_project_convert.py in the style of public Gluon MNIST examples): argument parsing,
a HybridBlock with hybrid_forward, a Sequential built in a name scope, MNIST through
gluon.data with a transform, sgd with momentum and weight decay, autograd.record, backward,
trainer.step, a metric, device contexts and a checkpoint."""
import argparse

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon import nn

parser = argparse.ArgumentParser(description='a small Gluon MLP on MNIST')
parser.add_argument('--batch-size', type=int, default=50)
parser.add_argument('--epochs', type=int, default=1)
parser.add_argument('--lr', type=float, default=0.05)
parser.add_argument('--gpu', action='store_true')
args = parser.parse_args()


class Head(gluon.HybridBlock):
    """The classifier head: a hidden layer, then the scores (hybrid_forward's F ops)."""

    def __init__(self, hidden, classes, **kwargs):
        super(Head, self).__init__(**kwargs)
        with self.name_scope():
            self.hidden = nn.Dense(hidden)
            self.out = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        h = F.relu(self.hidden(x))
        return self.out(F.tanh(h))


net = nn.HybridSequential()
with net.name_scope():
    net.add(nn.Dense(64, activation='relu'))
    net.add(Head(32, 10))
net.hybridize()


def transform(data, label):
    return data.reshape((-1,)).astype(np.float32) / 255, label


train_data = gluon.data.DataLoader(
    gluon.data.vision.MNIST('./data', train=True, transform=transform),
    batch_size=args.batch_size, shuffle=True, last_batch='discard')


def main(ctx):
    net.initialize(mx.init.Xavier(magnitude=2.24), ctx=ctx)
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': args.lr, 'momentum': 0.9, 'wd': 1e-4})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    metric = mx.metric.Accuracy()
    for epoch in range(args.epochs):
        metric.reset()
        for data, label in train_data:
            data = data.as_in_context(ctx)
            label = label.as_in_context(ctx)
            with autograd.record():
                output = net(data)
                loss = loss_fn(output, label)
            loss.backward()
            trainer.step(data.shape[0])
            metric.update([label], [output])
        name, acc = metric.get()
        print('epoch %d: %s %.3f, last loss %.4f' % (epoch, name, acc, loss.mean().asscalar()))
    net.save_parameters('mlp.params')


if __name__ == '__main__':
    main(mx.gpu(0) if args.gpu else mx.cpu())
