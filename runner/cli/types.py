"""The argparse types of the verbs' arguments: each turns the text of an argument into its value, or says
in one line why it cannot (argparse.ArgumentTypeError)."""

import argparse


def whole_number(text: str, what: str = "a whole number") -> int:
    """`text` as an int; else it is not `what`."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def positive(text: str) -> int:
    """A whole number of at least 1."""
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def seconds(text: str) -> float:
    """A finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds above 0")
    return value


def port_number(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535."""
    value = whole_number(text, "a port number")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0 to 65535)")
    return value


def host_port(text: str) -> str:
    """HOST:PORT (a name or an address, [v6] in brackets), as the proxy names endpoints."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or host != host.strip() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return f"{host.lower()}:{int(port)}"


def scheduler_address(text: str) -> str:
    """A Dask scheduler's tcp://HOST:PORT (or tls://HOST:PORT)."""
    scheme, sep, location = text.partition("://")
    if scheme not in ("tcp", "tls") or not sep:
        raise argparse.ArgumentTypeError(f"{text!r} is not tcp://HOST:PORT (or tls://HOST:PORT)")
    host_port(location)
    return text


def utf8_text(text: str) -> str:
    """Free text kept in a record: UTF-8 only (an undecodable byte of the command line reaches Python as a
    lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise argparse.ArgumentTypeError(f"not UTF-8 text (character {e.start + 1})") from None
    return text
