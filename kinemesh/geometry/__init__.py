"""kinemesh.geometry"""
