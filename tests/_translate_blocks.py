"""Native Gluon blocks used by the translate tests and the example (users' own HybridBlocks)."""
import mxnet as mx
from mxnet.gluon import nn, rnn


class CRNN(nn.HybridBlock):
    """Seed 000's CRNN written natively in Gluon: conv-BN-ReLU-pool stack, two bidirectional
    LSTMs (TNC), a per-time-step Dense (flatten=False)."""

    def __init__(self, classes=11, hidden=16, **kw):
        super().__init__(**kw)
        self.cnn = nn.HybridSequential()
        for c in (8, 16):
            self.cnn.add(nn.Conv2D(c, 3, padding=1, use_bias=False), nn.BatchNorm(), nn.Activation("relu"),
                         nn.MaxPool2D((2, 2)))
        self.rnn = rnn.LSTM(hidden, num_layers=2, bidirectional=True, layout="TNC")
        self.fc = nn.Dense(classes, flatten=False)

    def hybrid_forward(self, F, x):
        f = self.cnn(x)                                   # N, C, H, W
        f = F.reshape(F.transpose(f, axes=(3, 0, 1, 2)), shape=(0, 0, -1))   # W=T, N, C*H
        y = self.rnn(f)
        return F.transpose(self.fc(y), axes=(1, 0, 2))    # N, T, classes


class Residual(nn.HybridBlock):
    """A residual branch: out = relu(bn(conv(x)) + shortcut(x)), the shortcut called on x."""

    def __init__(self, channels=8, **kw):
        super().__init__(**kw)
        self.conv = nn.Conv2D(channels, 3, padding=1, in_channels=channels)
        self.bn = nn.BatchNorm(in_channels=channels)
        self.shortcut = nn.Conv2D(channels, 1, in_channels=channels)

    def hybrid_forward(self, F, x):
        return F.relu(self.bn(self.conv(x)) + self.shortcut(x))


class SharedTwice(nn.HybridBlock):
    """One child called twice (shared weights) plus concat / slicing / scalar ops of its own."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.proj = nn.Dense(6, flatten=False, in_units=6)
        self.act = nn.Activation("tanh")

    def hybrid_forward(self, F, x):
        a = self.act(self.proj(x))
        b = self.proj(a * 0.5)
        c = F.concat(a, b, dim=-1)
        return F.slice_axis(c, axis=-1, begin=2, end=10).mean(axis=1), F.sigmoid(b)


class TiedLM(nn.HybridBlock):
    """An embedding whose weight is shared with the output Dense (tied weights)."""

    def __init__(self, vocab=20, dim=8, **kw):
        super().__init__(**kw)
        self.embedding = nn.Embedding(vocab, dim)
        self.rnn = rnn.GRU(dim, layout="NTC", input_size=dim)
        self.decoder = nn.Dense(vocab, flatten=False, in_units=dim, params=self.embedding.params)

    def hybrid_forward(self, F, tokens):
        return self.decoder(self.rnn(self.embedding(tokens)))


class WithStates(nn.HybridBlock):
    """An LSTM called with explicit begin states, returning the output and the last states."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.lstm = rnn.LSTM(5, input_size=3, layout="NTC")

    def hybrid_forward(self, F, x, h, c):
        out, (h1, c1) = self.lstm(x, [h, c])
        return out, h1, c1


class PythonLoop(nn.Block):
    """A non-hybridizable block: its forward loops in Python over NDArray values."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.inner = nn.Dense(4, in_units=4)

    def forward(self, x):
        for _ in range(int(x.sum().asscalar() > 0) + 1):
            x = self.inner(x)
        return x
