"""Operator actions that read across rooms: ``status`` (the consumer groups, lag and workers of every app), a
deleted group's ``drain`` back through the pending topic, and the dead letters' ``redrive``; drain and redrive
copy records in one transaction with their reading group's commit (transfer.py). Above worker/ and client/,
below cli/."""
