"""The corpus of the word language model (dualdl's own test project, written in the style of
the public Gluon/PyTorch word_language_model examples): text files -> token ids, then the
batchify/get_batch slicing of a long id sequence into (bptt, batch) pieces."""
import os

import mxnet as mx


class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, 'train.txt'))
        self.valid = self.tokenize(os.path.join(path, 'valid.txt'))
        self.test = self.tokenize(os.path.join(path, 'test.txt'))

    def tokenize(self, path):
        """Every word of the file, an <eos> after each line, as an int32 id array."""
        assert os.path.exists(path), path
        ids = []
        with open(path, 'r', encoding='utf8') as f:
            for line in f:
                for word in line.split() + ['<eos>']:
                    ids.append(self.dictionary.add_word(word))
        return mx.nd.array(ids, dtype='int32')


def batchify(data, batch_size):
    """(tokens,) -> (tokens // batch_size, batch_size): each column a contiguous stream."""
    nbatch = data.shape[0] // batch_size
    data = data[:nbatch * batch_size]
    return data.reshape((batch_size, nbatch)).T


def detach(hidden):
    """The carried state without its graph: backpropagation stops at the batch's start."""
    if isinstance(hidden, (tuple, list)):
        hidden = [h.detach() for h in hidden]
    else:
        hidden = hidden.detach()
    return hidden


def get_batch(source, i, bptt):
    seq_len = min(bptt, source.shape[0] - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len]
    return data, target.reshape((-1,))
