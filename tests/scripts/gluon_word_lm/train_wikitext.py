"""Train the language model on WikiText-2 through gluon.contrib's reader (dualdl's own script in
the style of apache/mxnet's example/gluon/word_language_model/train.py): the samples batched by
an IntervalSampler so each batch row continues the previous batch's, the loss scaled by the
tokens of a batch and trainer.step(1), the gradients clipped unscaled, the learning rate divided
by 4 when the validation loss does not improve."""
import argparse
import math
import os
import time

import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon import contrib

import model
from data import detach

parser = argparse.ArgumentParser(description='an LSTM language model on WikiText-2')
parser.add_argument('--emsize', type=int, default=16)
parser.add_argument('--nhid', type=int, default=16)
parser.add_argument('--nlayers', type=int, default=2)
parser.add_argument('--lr', type=float, default=20)
parser.add_argument('--clip', type=float, default=0.25)
parser.add_argument('--epochs', type=int, default=3)
parser.add_argument('--batch_size', type=int, default=4)
parser.add_argument('--bptt', type=int, default=5)
parser.add_argument('--dropout', type=float, default=0.5)
parser.add_argument('--tied', action='store_true')
parser.add_argument('--hybridize', action='store_true')
parser.add_argument('--save', type=str, default='wt2.params')
args = parser.parse_args()
context = mx.cpu(0)

dirname = os.path.expanduser('./data')
train_dataset = contrib.data.text.WikiText2(dirname, 'train', seq_len=args.bptt)
vocab = train_dataset.vocabulary
val_dataset = contrib.data.text.WikiText2(dirname, 'validation', vocab=vocab, seq_len=args.bptt)


def loader(dataset):
    nbatch = len(dataset) // args.batch_size
    return gluon.data.DataLoader(dataset, batch_size=args.batch_size,
                                 sampler=contrib.data.IntervalSampler(len(dataset), nbatch),
                                 last_batch='discard')


train_data, val_data = loader(train_dataset), loader(val_dataset)
model = model.RNNModel(len(vocab), args.emsize, args.nhid, args.nlayers, args.dropout, args.tied)
if args.hybridize:
    model.hybridize()
model.initialize(mx.init.Xavier(), ctx=context)
trainer = gluon.Trainer(model.collect_params(), 'sgd',
                        {'learning_rate': args.lr, 'momentum': 0, 'wd': 0})
loss = gluon.loss.SoftmaxCrossEntropyLoss()


def evaluate(data_source):
    total_L, ntotal = 0.0, 0
    hidden = model.begin_state(func=mx.nd.zeros, batch_size=args.batch_size, ctx=context)
    for data, target in data_source:
        data = data.as_in_context(context).T
        target = target.as_in_context(context).T.reshape((-1, 1))
        output, hidden = model(data, hidden)
        L = loss(output, target)
        total_L += mx.nd.sum(L).asscalar()
        ntotal += L.size
    return total_L / ntotal


best_val = float('Inf')
for epoch in range(args.epochs):
    start_time = time.time()
    hidden = model.begin_state(func=mx.nd.zeros, batch_size=args.batch_size, ctx=context)
    for i, (data, target) in enumerate(train_data):
        data = data.as_in_context(context).T
        target = target.as_in_context(context).T.reshape((-1, 1))
        hidden = detach(hidden)
        with autograd.record():
            output, hidden = model(data, hidden)
            L = loss(output, target) / (args.bptt * args.batch_size)
            L.backward()
        grads = [p.grad(context) for p in model.collect_params().values()]
        norm = gluon.utils.clip_global_norm(grads, args.clip)
        trainer.step(1)
    val_L = evaluate(val_data)
    print('[epoch %d] %.2f s, last norm %.3f, valid ppl %.2f' % (
        epoch, time.time() - start_time, norm, math.exp(val_L)))
    if val_L < best_val:
        best_val = val_L
        model.save_parameters(args.save)
    else:
        args.lr = args.lr * 0.25
        trainer.set_learning_rate(args.lr)
