"""kinemesh.dynamics"""
