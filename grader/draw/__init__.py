"""Drawing inputs: seeded scenarios covering every legal input of the contract, and the groups of calls each check needs."""
