"""kinemesh.eval"""
