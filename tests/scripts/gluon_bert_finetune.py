"""A BERT sentence classifier fine-tuning script for the project converter's tests (dualdl's own,
in the style of gluonnlp v0.10's scripts/bert/finetune_classifier.py): a tiny BERT from
nlp.model.get_model, BERTClassifier, BERTTokenizer + BERTSentenceTransform over a vocabulary built
from the data, FixedBucketSampler + batchify, bertadam with warmup + linear decay through
trainer.set_learning_rate, no weight decay on LayerNorm and biases, gradient accumulation
(grad_req='add', allreduce_grads, update(accumulate)), clip_grad_global_norm, accuracy."""
import argparse
import io
import logging
import random

import numpy as np
import mxnet as mx
from mxnet import gluon
import gluonnlp as nlp

parser = argparse.ArgumentParser(description='fine-tune a tiny BERT on a TSV task')
parser.add_argument('--train', type=str, default='data/train.tsv')
parser.add_argument('--epochs', type=int, default=2)
parser.add_argument('--batch_size', type=int, default=4)
parser.add_argument('--accumulate', type=int, default=2)
parser.add_argument('--lr', type=float, default=5e-4)
parser.add_argument('--epsilon', type=float, default=1e-6)
parser.add_argument('--warmup_ratio', type=float, default=0.25)
parser.add_argument('--max_len', type=int, default=16)
parser.add_argument('--max_norm', type=float, default=1.0)
parser.add_argument('--seed', type=int, default=2)
parser.add_argument('--log_interval', type=int, default=4)
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, format='%(levelname)s %(message)s')

np.random.seed(args.seed)
random.seed(args.seed)
mx.random.seed(args.seed)
ctx = mx.cpu()


def read_tsv(path):
    """sentence <TAB> label, one per line, after a header line"""
    with io.open(path, encoding='utf-8') as f:
        rows = [line.rstrip('\n').split('\t') for line in f][1:]
    return [(text, int(label)) for text, label in rows]


rows = read_tsv(args.train)
counter = nlp.data.count_tokens([w for text, _ in rows for w in text.lower().split()])
vocab = nlp.vocab.BERTVocab(counter)
tokenizer = nlp.data.BERTTokenizer(vocab, lower=True)
transform = nlp.data.BERTSentenceTransform(tokenizer, max_seq_length=args.max_len, pad=False,
                                           pair=False)

bert, vocabulary = nlp.model.get_model('bert_12_768_12', dataset_name=None, vocab=vocab,
                                       pretrained=False, ctx=ctx, use_pooler=True,
                                       use_decoder=False, use_classifier=False,
                                       hparam_allow_override=True, num_layers=2, units=32,
                                       hidden_size=64, num_heads=2, max_length=64,
                                       embed_size=32, dropout=0.0)
model = nlp.model.BERTClassifier(bert, dropout=0.0, num_classes=2)
model.initialize(init=mx.init.Normal(0.02), ctx=ctx)
model.hybridize(static_alloc=True)
loss_function = gluon.loss.SoftmaxCELoss()
loss_function.hybridize(static_alloc=True)


def convert(row):
    input_ids, valid_length, segment_ids = transform((row[0],))
    return input_ids, segment_ids, valid_length, np.array([row[1]], dtype='int32')


data_train = mx.gluon.data.SimpleDataset(list(map(convert, rows)))
data_train_len = data_train.transform(lambda _, segment_ids, valid_length, label: valid_length,
                                      lazy=False)
pad_val = vocabulary[vocabulary.padding_token]
batchify_fn = nlp.data.batchify.Tuple(
    nlp.data.batchify.Pad(axis=0, pad_val=pad_val),  # input
    nlp.data.batchify.Pad(axis=0, pad_val=0),  # segment
    nlp.data.batchify.Stack(),  # length
    nlp.data.batchify.Stack('int32'))  # label
batch_sampler = nlp.data.sampler.FixedBucketSampler(data_train_len, batch_size=args.batch_size,
                                                    num_buckets=3, ratio=0, shuffle=True)
train_data = gluon.data.DataLoader(dataset=data_train, batch_sampler=batch_sampler,
                                   batchify_fn=batchify_fn)


def train(metric):
    """warmup + linear decay, accumulation, global-norm clipping, as finetune_classifier.py"""
    all_model_params = model.collect_params()
    optimizer_params = {'learning_rate': args.lr, 'epsilon': args.epsilon, 'wd': 0.01}
    trainer = gluon.Trainer(all_model_params, 'bertadam', optimizer_params,
                            update_on_kvstore=False)
    accumulate = args.accumulate
    step_size = args.batch_size * accumulate if accumulate else args.batch_size
    num_train_steps = int(len(data_train) / step_size * args.epochs)
    num_warmup_steps = int(num_train_steps * args.warmup_ratio)
    step_num = 0
    # no weight decay on LayerNorm and bias terms
    for _, v in model.collect_params('.*beta|.*gamma|.*bias').items():
        v.wd_mult = 0.0
    params = [p for p in all_model_params.values() if p.grad_req != 'null']
    if accumulate and accumulate > 1:
        for p in params:
            p.grad_req = 'add'
    for epoch_id in range(args.epochs):
        metric.reset()
        step_loss = 0
        all_model_params.zero_grad()
        for batch_id, seqs in enumerate(train_data):
            if step_num < num_warmup_steps:
                new_lr = args.lr * step_num / num_warmup_steps
            else:
                offset = (step_num - num_warmup_steps) / (num_train_steps - num_warmup_steps)
                new_lr = args.lr - offset * args.lr
            trainer.set_learning_rate(new_lr)
            with mx.autograd.record():
                input_ids, segment_ids, valid_length, label = seqs
                input_ids = input_ids.as_in_context(ctx)
                valid_length = valid_length.as_in_context(ctx).astype('float32')
                label = label.as_in_context(ctx)
                out = model(input_ids, segment_ids.as_in_context(ctx), valid_length)
                ls = loss_function(out, label).mean()
            ls.backward()
            if not accumulate or (batch_id + 1) % accumulate == 0:
                trainer.allreduce_grads()
                nlp.utils.clip_grad_global_norm(params, args.max_norm)
                trainer.update(accumulate if accumulate else 1)
                step_num += 1
                if accumulate and accumulate > 1:
                    all_model_params.zero_grad()
            step_loss += ls.asscalar()
            metric.update([label.reshape((-1))], [out])
            if (batch_id + 1) % args.log_interval == 0:
                name, acc = metric.get()
                logging.info('[Epoch %d Batch %d/%d] loss=%.4f, lr=%.7f, %s=%.4f', epoch_id,
                             batch_id + 1, len(train_data), step_loss / args.log_interval,
                             trainer.learning_rate, name, acc)
                step_loss = 0
        mx.nd.waitall()
    model.save_parameters('bert_classifier.params')


train(mx.metric.Accuracy())
