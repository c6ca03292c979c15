"""Tests of the sandbox package (sender_sim/sandbox/)."""
