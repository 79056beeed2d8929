"""The broker's service room: protocol-neutral operations, one place each (DESIGN.md, "two front
doors, one house").
"""
