"""``dualdl demo``: the seed-000 CRNN (VGG-style CNN + two bidirectional LSTM layers + CTC) trained
to read strings of real handwritten digits on both backends from identical initial weights."""
