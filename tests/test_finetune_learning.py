"""The ZO fine-tuning step learns (issue 31): a step can be bit-exact on the RTL and pinned
formula by formula yet no longer be an estimate of the gradient (an update walk that does
not restore the generator steps along a z neither forward pass used). So a short run of the
float twin must bring its training loss down, and the same run with the estimate's signal
destroyed (``control="random-sign"``: each g times a random sign) must not.

The run: the tiny random BERT (2 blocks, LoRA-FA rank 4), the 16 test-split examples the
head never saw as the training set and every step's batch (the whole set: the loss of a
step is the loss on the training set itself), q = 4, lr 0.1, eps 2^-5, 150 steps.
Measured (training loss after / before, seeds 0..4): learning 0.435, 0.621, 0.420, 0.554,
0.569; the random-sign control 0.832, 0.938, 2.63, 1.21, 0.924 (another 20 control sign
streams: 0.814 or more); an update that does not restore the generator 1.02 to 2.4. The
bound 0.7 sits between them.
"""
from __future__ import annotations

import pytest

from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.train import ZoFinetune, load_model, prepare

LEARN = FinetuneConfig(model="tiny", blocks=2, seq_len=8, batch=16, queries=4, n_train=32,
                       n_test=16, calibration=8, rank=4, lr=0.1, eps=2 ** -5, seed=0)
STEPS = 150
FACTOR = 0.7


pytestmark = pytest.mark.usefixtures("one_torch_thread")

@pytest.fixture(scope="module")
def held_out():
    """The run's data: the 16 examples of the test split (unseen by the head) as the
    training set, so there is something to learn."""
    prepared = prepare(LEARN, load_model(LEARN))
    prepared.train = prepared.test
    assert len(prepared.train[2]) == LEARN.batch
    return prepared


def loss_ratio(run: ZoFinetune) -> float:
    """Training loss after STEPS steps over the training loss before (unperturbed model)."""
    start = run.train_loss()
    for _ in range(STEPS):
        record = run.step()
        assert sorted(record.batch.tolist()) == list(range(LEARN.batch))   # the whole set
    return run.train_loss() / start


def test_a_short_float_run_learns(held_out):
    """The training loss falls to at most 0.7 of its start (measured 0.435)."""
    assert loss_ratio(ZoFinetune(held_out, "float")) <= FACTOR


def test_the_same_run_without_the_signal_does_not_learn(held_out):
    """The control: the same run with each g times a random sign stays above 0.7 of its
    start (measured 0.832): what the learning test sees is the estimator's signal."""
    assert loss_ratio(ZoFinetune(held_out, "float", control="random-sign")) > FACTOR
