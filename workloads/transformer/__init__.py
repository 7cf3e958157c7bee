"""The Transformer family: encoder-decoder (Vaswani et al.), BERT and GPT-2 from one set of blocks."""
