"""BERT sentence-pair fine-tuning on a GLUE task for the project converter's tests (dualdl's own, in
the style of gluonnlp v0.10's scripts/bert/finetune_classifier.py): the task from get_task, the
model from get_model(**params) (the architecture known at run time only), the dataset's cached
vocabulary, pretrained weights from a .params file, BERTClassifier with dropout, GLUE's
truncate/concat helpers, FixedBucketSampler + batchify, bertadam with warmup and linear decay,
accumulation, clipping, dev evaluation with the task's metrics, checkpoints."""
import argparse
import logging
import os
from functools import partial

import numpy as np
import mxnet as mx
from mxnet import gluon
import gluonnlp as nlp
from gluonnlp.data.classification import get_task
from gluonnlp.data.bert.glue import truncate_seqs_equal, concat_sequences
from gluonnlp.model import BERTClassifier

parser = argparse.ArgumentParser(description='fine-tune BERT on a GLUE task')
parser.add_argument('--task_name', type=str, default='MRPC')
parser.add_argument('--bert_model', type=str, default='bert_12_768_12')
parser.add_argument('--bert_dataset', type=str, default='book_corpus_wiki_en_uncased')
parser.add_argument('--pretrained_bert_parameters', type=str, default=None)
parser.add_argument('--epochs', type=int, default=2)
parser.add_argument('--batch_size', type=int, default=4)
parser.add_argument('--dev_batch_size', type=int, default=8)
parser.add_argument('--accumulate', type=int, default=2)
parser.add_argument('--lr', type=float, default=1e-3)
parser.add_argument('--max_len', type=int, default=32)
parser.add_argument('--seed', type=int, default=2)
parser.add_argument('--output_dir', type=str, default='./output_dir')
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, format='%(levelname)s %(message)s')
np.random.seed(args.seed)
mx.random.seed(args.seed)
ctx = mx.cpu()

task = get_task(args.task_name)
get_model_params = {'name': args.bert_model, 'dataset_name': args.bert_dataset,
                    'pretrained': args.pretrained_bert_parameters is None, 'ctx': ctx,
                    'use_decoder': False, 'use_classifier': False, 'use_pooler': True}
bert, vocabulary = nlp.model.get_model(**get_model_params)
model = BERTClassifier(bert, dropout=0.1, num_classes=len(task.class_labels))
model.classifier.initialize(init=mx.init.Normal(0.02), ctx=ctx)
if args.pretrained_bert_parameters:
    nlp.utils.load_parameters(model.bert, args.pretrained_bert_parameters, ctx=ctx,
                              ignore_extra=True, cast_dtype=True)
nlp.utils.mkdir(args.output_dir)
model.hybridize(static_alloc=True)
loss_function = gluon.loss.SoftmaxCELoss()
tokenizer = nlp.data.BERTTokenizer(vocabulary, lower=True)


def to_features(example, truncate_length):
    """[CLS] a [SEP] b [SEP] ids, segment ids, length and the label's index"""
    label_map = {label: i for i, label in enumerate(task.class_labels)}
    label = np.array([label_map[example[-1]]], dtype='int32')
    tokens = truncate_seqs_equal([tokenizer(text) for text in example[:-1]], truncate_length)
    tokens[0] = [vocabulary.cls_token] + tokens[0]
    tokens, segment_ids, _ = concat_sequences(tokens, [[vocabulary.sep_token]] * len(tokens))
    input_ids = vocabulary[tokens]
    return input_ids, segment_ids, len(input_ids), label


trans = partial(to_features, truncate_length=args.max_len - 3)
data_train = mx.gluon.data.SimpleDataset(list(map(trans, task.dataset_train()[1])))
data_dev = mx.gluon.data.SimpleDataset(list(map(trans, task.dataset_dev()[1])))
batchify_fn = nlp.data.batchify.Tuple(
    nlp.data.batchify.Pad(axis=0, pad_val=vocabulary[vocabulary.padding_token]),
    nlp.data.batchify.Pad(axis=0, pad_val=0), nlp.data.batchify.Stack(),
    nlp.data.batchify.Stack('int32'))
lengths = data_train.transform(lambda _, segment_ids, valid_length, label: valid_length, lazy=False)
batch_sampler = nlp.data.sampler.FixedBucketSampler(lengths, batch_size=args.batch_size,
                                                    num_buckets=10, ratio=0, shuffle=True)
train_data = gluon.data.DataLoader(data_train, batch_sampler=batch_sampler,
                                   batchify_fn=batchify_fn)
dev_data = gluon.data.DataLoader(data_dev, batch_size=args.dev_batch_size, shuffle=False,
                                 batchify_fn=batchify_fn)


def forward(seqs):
    input_ids, segment_ids, valid_length, label = seqs
    out = model(input_ids.as_in_context(ctx), segment_ids.as_in_context(ctx),
                valid_length.as_in_context(ctx).astype('float32'))
    return out, label.as_in_context(ctx)


def evaluate(metric):
    metric.reset()
    for seqs in dev_data:
        out, label = forward(seqs)
        metric.update([label.reshape((-1))], [out])
    names, values = metric.get()
    logging.info('dev: %s', ', '.join('%s=%.4f' % nv for nv in zip(names, values)))
    return values[0]


trainer = gluon.Trainer(model.collect_params(), 'bertadam',
                        {'learning_rate': args.lr, 'epsilon': 1e-6, 'wd': 0.01})
num_train_steps = int(len(data_train) / (args.batch_size * args.accumulate) * args.epochs)
num_warmup_steps = int(num_train_steps * 0.1)
for _, v in model.collect_params('.*beta|.*gamma|.*bias').items():
    v.wd_mult = 0.0
params = [p for p in model.collect_params().values() if p.grad_req != 'null']
for p in params:
    p.grad_req = 'add'
step_num, best = 0, None
for epoch_id in range(args.epochs):
    model.collect_params().zero_grad()
    for batch_id, seqs in enumerate(train_data):
        if step_num < num_warmup_steps:
            new_lr = args.lr * step_num / num_warmup_steps
        else:
            offset = (step_num - num_warmup_steps) / (num_train_steps - num_warmup_steps)
            new_lr = args.lr - offset * args.lr
        trainer.set_learning_rate(new_lr)
        with mx.autograd.record():
            out, label = forward(seqs)
            ls = loss_function(out, label).mean()
        ls.backward()
        if (batch_id + 1) % args.accumulate == 0:
            trainer.allreduce_grads()
            nlp.utils.clip_grad_global_norm(params, 1)
            trainer.update(args.accumulate)
            step_num += 1
            model.collect_params().zero_grad()
    score = evaluate(task.metrics)
    path = os.path.join(args.output_dir, 'model_bert_%s_%d.params' % (args.task_name, epoch_id))
    nlp.utils.save_parameters(model, path)
    if best is None or score >= best[0]:
        best = (score, path)
nlp.utils.load_parameters(model, best[1])
evaluate(task.metrics)
