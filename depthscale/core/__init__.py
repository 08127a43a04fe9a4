"""The models axis M: stacking, padding and training many transformers as one program."""
