"""Hosts as network namespaces, for the tests that need root: skipped, and saying why, where none can be made."""
import pytest


def created_network(hosts, **kwargs):
    """A created ``netns.VirtualNetwork`` of ``hosts``; the test is skipped where namespaces cannot be made."""
    from labkit.deploy import netns

    reason = netns.unavailable_reason()
    if reason:
        pytest.skip(reason)
    netns.remove_stale()
    try:
        return netns.VirtualNetwork(hosts, **kwargs).create()
    except netns.NetnsError as error:
        pytest.skip(f"network namespaces cannot be created here: {error}")
