import pickle

from streams.errors import InvalidInput, TidemarkError


def test_invalid_input_names_the_field_and_the_reason() -> None:
    error = InvalidInput("retry.interval_ms", "must be >= 1, got 0")
    assert isinstance(error, TidemarkError)
    assert (error.field, error.reason) == ("retry.interval_ms", "must be >= 1, got 0")
    assert str(error) == "retry.interval_ms: must be >= 1, got 0"


def test_invalid_input_survives_pickling() -> None:
    copy = pickle.loads(pickle.dumps(InvalidInput("stream_id", "must not be empty")))
    assert (copy.field, copy.reason) == ("stream_id", "must not be empty")
