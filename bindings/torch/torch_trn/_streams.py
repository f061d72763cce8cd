"""Streams and events, as torch.cuda's: a Stream is a trn queue of its own on a device, an Event
a point on a stream (and, with enable_timing, the simulated device time it was reached)."""
import contextlib

import torch

_ops = torch.ops.torch_trn


def _device_index(device):
    from . import _index

    index = _index(device)
    return _ops.current_device() if index < 0 else index


# PyTorch's number for the PrivateUse1 device type (c10::DeviceType), which trn renames.
_DEVICE_TYPE = 20


class Stream(torch.Stream):
    """A queue of its own on a device (priority < 0: high priority). A torch.Stream, so that
    Tensor.record_stream, torch.accelerator and PyTorch's stream utilities take it."""

    def __new__(cls, device=None, priority=0, _stream_id=None):
        index = _device_index(device)
        stream_id = _ops.stream_create(index, priority) if _stream_id is None else _stream_id
        return super().__new__(cls, stream_id=stream_id, device_index=index,
                               device_type=_DEVICE_TYPE)

    def __init__(self, device=None, priority=0, _stream_id=None):
        pass  # made whole by __new__ (torch.Stream's fields are set there)

    @property
    def trn_queue(self):
        """The stream's trn_queue_t as an integer, for C code that submits its own work (kernels
        launched with trn_queue_launch on tensors found by trn_mem_lookup from data_ptr())."""
        return _ops.stream_handle(self.device_index, self.stream_id)

    def synchronize(self):
        _ops.stream_synchronize(self.device_index, self.stream_id)

    def query(self):
        """True when all work queued on the stream so far has completed."""
        return _ops.stream_query(self.device_index, self.stream_id)

    def wait_event(self, event):
        event.wait(self)

    def wait_stream(self, other):
        self.wait_event(other.record_event())

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return (isinstance(other, torch.Stream) and other.device.type == self.device.type
                and self.device_index == other.device_index and self.stream_id == other.stream_id)

    def __hash__(self):
        return hash((self.device_index, self.stream_id))

    def __repr__(self):
        return f"<torch_trn.Stream device={self.device} id={self.stream_id}>"


def current_stream(device=None):
    index = _device_index(device)
    return Stream(index, _stream_id=_ops.current_stream(index))


def default_stream(device=None):
    return Stream(_device_index(device), _stream_id=0)


@contextlib.contextmanager
def stream(s):
    """Makes `s` the current stream of its device (and its device current) inside the block."""
    if s is None:
        yield
        return
    previous_device = _ops.current_device()
    previous = _ops.current_stream(s.device_index)
    _ops.set_device(s.device_index)
    _ops.set_stream(s.device_index, s.stream_id)
    try:
        yield
    finally:
        _ops.set_stream(s.device_index, previous)
        _ops.set_device(previous_device)


class Event:
    """A point on a stream. elapsed_time() gives simulated device milliseconds between two
    events made with enable_timing=True."""

    def __init__(self, enable_timing=False):
        self.enable_timing = enable_timing
        self._id = _ops.event_create(enable_timing)
        self._recorded = False

    def record(self, stream=None):
        stream = stream or current_stream()
        _ops.event_record(self._id, stream.device_index, stream.stream_id)
        self._recorded = True

    def wait(self, stream=None):
        stream = stream or current_stream()
        _ops.event_wait(self._id, stream.device_index, stream.stream_id)

    def query(self):
        return _ops.event_query(self._id)

    def synchronize(self):
        _ops.event_synchronize(self._id)

    def elapsed_time(self, end_event):
        return _ops.event_elapsed_ms(self._id, end_event._id)

    def __del__(self):
        try:
            _ops.event_destroy(self._id)
        except Exception:
            pass
