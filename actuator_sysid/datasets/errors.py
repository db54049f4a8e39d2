"""The user-input error every reader, check and fit raises; its own module so the name rule and the recording
both use it without importing each other."""


class DatasetError(ValueError):
    """A problem with user-supplied data; the message says what, where and how to fix it."""
