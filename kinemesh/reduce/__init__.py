"""kinemesh.reduce"""
