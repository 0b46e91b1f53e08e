"""d2l's LeNet (Dive into Deep Learning, sec_lenet, MXNet numpy interface) trained by d2l's own
``train_ch6`` on Fashion-MNIST; a script written for tests/test_project_d2l.py in the book's
style, small sizes (the project folder the test builds holds d2l/mxnet.py from the d2l package)."""
from d2l import mxnet as d2l
from mxnet import npx
from mxnet.gluon import nn
npx.set_np()

net = nn.Sequential()
net.add(nn.Conv2D(channels=6, kernel_size=5, padding=2, activation='sigmoid'),
        nn.AvgPool2D(pool_size=2, strides=2),
        nn.Conv2D(channels=16, kernel_size=5, activation='sigmoid'),
        nn.AvgPool2D(pool_size=2, strides=2),
        nn.Dense(120, activation='sigmoid'),
        nn.Dense(84, activation='sigmoid'),
        nn.Dense(10))

batch_size, lr, num_epochs = 32, 0.9, 2
train_iter, test_iter = d2l.load_data_fashion_mnist(batch_size=batch_size)
d2l.train_ch6(net, train_iter, test_iter, num_epochs, lr, d2l.try_gpu())
