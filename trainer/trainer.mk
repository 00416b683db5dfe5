# trainer/trainer.mk: make fragments of the trainer (included by the top-level Makefile).
include trainer/nn.mk
-include trainer/data.mk
-include trainer/cuda.mk
-include trainer/prog.mk
