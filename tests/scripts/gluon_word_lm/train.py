"""Train the LSTM language model (dualdl's own test project for `dualdl convert-project`):
truncated backpropagation through time with the hidden state detached between batches, a loss
per token, gradients clipped by their global norm (scaled by the batch size, as trainer.step
divides by it), the learning rate annealed by 4 when the validation loss does not improve, the
best model saved and reloaded for the test perplexity."""
import argparse
import logging
import math
import time

import mxnet as mx
from mxnet import autograd, gluon

import data
import model

parser = argparse.ArgumentParser(description='an LSTM word language model')
parser.add_argument('--data', type=str, default='./data', help='folder of train/valid/test.txt')
parser.add_argument('--emsize', type=int, default=32)
parser.add_argument('--nhid', type=int, default=32)
parser.add_argument('--nlayers', type=int, default=2)
parser.add_argument('--lr', type=float, default=1.0)
parser.add_argument('--clip', type=float, default=0.2)
parser.add_argument('--epochs', type=int, default=3)
parser.add_argument('--batch_size', type=int, default=4)
parser.add_argument('--bptt', type=int, default=5)
parser.add_argument('--dropout', type=float, default=0.2)
parser.add_argument('--tied', action='store_true')
parser.add_argument('--gpu', action='store_true')
parser.add_argument('--log-interval', type=int, default=5)
parser.add_argument('--save', type=str, default='lm.params')
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, format='%(message)s')

context = mx.gpu(0) if args.gpu else mx.cpu()
corpus = data.Corpus(args.data)
train_data = data.batchify(corpus.train, args.batch_size).as_in_context(context)
val_data = data.batchify(corpus.valid, args.batch_size).as_in_context(context)
test_data = data.batchify(corpus.test, args.batch_size).as_in_context(context)

ntokens = len(corpus.dictionary)
model = model.RNNModel(ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied)
model.initialize(mx.init.Xavier(), ctx=context)
trainer = gluon.Trainer(model.collect_params(), 'sgd',
                        {'learning_rate': args.lr, 'momentum': 0, 'wd': 0})
loss = gluon.loss.SoftmaxCrossEntropyLoss()


def evaluate(source):
    total_L = 0.0
    ntotal = 0
    hidden = model.begin_state(func=mx.nd.zeros, batch_size=args.batch_size, ctx=context)
    with autograd.predict_mode():
        for i in range(0, source.shape[0] - 1, args.bptt):
            inputs, target = data.get_batch(source, i, args.bptt)
            output, hidden = model(inputs, hidden)
            L = loss(output, target)
            total_L += mx.nd.sum(L).asscalar()
            ntotal += L.size
    return total_L / ntotal


def train():
    best_val = float('Inf')
    lr = args.lr
    for epoch in range(args.epochs):
        total_L = 0.0
        start_time = time.time()
        hidden = model.begin_state(func=mx.nd.zeros, batch_size=args.batch_size, ctx=context)
        for ibatch, i in enumerate(range(0, train_data.shape[0] - 1, args.bptt)):
            inputs, target = data.get_batch(train_data, i, args.bptt)
            hidden = data.detach(hidden)
            with autograd.record():
                output, hidden = model(inputs, hidden)
                L = loss(output, target)
            L.backward()
            grads = [p.grad(context) for p in model.collect_params().values()]
            # trainer.step(batch_size) divides by the batch size: clip the summed gradient
            gluon.utils.clip_global_norm(grads, args.clip * args.bptt * args.batch_size)
            trainer.step(args.batch_size)
            total_L += mx.nd.sum(L).asscalar()
            if ibatch % args.log_interval == 0 and ibatch > 0:
                cur_L = total_L / args.bptt / args.batch_size / args.log_interval
                logging.info('[epoch %d batch %d] loss %.2f, ppl %.2f',
                             epoch, ibatch, cur_L, math.exp(cur_L))
                total_L = 0.0
        val_L = evaluate(val_data)
        logging.info('[epoch %d] %.2f s, valid loss %.2f, ppl %.2f',
                     epoch, time.time() - start_time, val_L, math.exp(val_L))
        if val_L < best_val:
            best_val = val_L
            model.save_parameters(args.save)
        else:
            lr = lr * 0.25
            trainer.set_learning_rate(lr)
            logging.info('learning rate annealed to %g', lr)


if __name__ == '__main__':
    train()
    model.load_parameters(args.save, ctx=context)
    test_L = evaluate(test_data)
    logging.info('test loss %.2f, test ppl %.2f', test_L, math.exp(test_L))
