"""d2l's concise RNN language model (Dive into Deep Learning, sec_rnn-concise, MXNet numpy
interface) trained by d2l's own ``train_ch8`` on the time machine text; a script written for
tests/test_project_d2l.py in the book's style, small sizes (the project folder the test builds
holds d2l/mxnet.py from the d2l package; the text is a synthetic one in ../data)."""
import argparse
import hashlib
import os

from d2l import mxnet as d2l
from mxnet import np, npx
from mxnet.gluon import rnn
npx.set_np()

parser = argparse.ArgumentParser(description="d2l's RNN language model on the time machine")
parser.add_argument('--random-iter', action='store_true', help='random sampling of subsequences')
args = parser.parse_args()

# the corpus: the local text registered in d2l's DATA_HUB (url, sha1), as d2l registers its own
with open(os.path.join('..', 'data', 'timemachine.txt'), 'rb') as f:
    d2l.DATA_HUB['time_machine'] = (d2l.DATA_URL + 'timemachine.txt',
                                    hashlib.sha1(f.read()).hexdigest())

batch_size, num_steps = 8, 10
train_iter, vocab = d2l.load_data_time_machine(batch_size, num_steps,
                                                use_random_iter=args.random_iter)

num_hiddens = 32
rnn_layer = rnn.RNN(num_hiddens)
rnn_layer.initialize()
state = rnn_layer.begin_state(batch_size=batch_size)
print(len(state), state[0].shape)

X = np.random.uniform(size=(num_steps, batch_size, len(vocab)))
Y, state_new = rnn_layer(X, state)
print(Y.shape, len(state_new), state_new[0].shape)

device = d2l.try_gpu()
net = d2l.RNNModel(rnn_layer, len(vocab))
net.initialize(force_reinit=True, ctx=device)
print(d2l.predict_ch8('time traveller', 10, net, vocab, device))

num_epochs, lr = 2, 1
d2l.train_ch8(net, train_iter, vocab, lr, num_epochs, device,
              use_random_iter=args.random_iter)
