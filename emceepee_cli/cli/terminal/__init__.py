"""What the CLI shows at a terminal and asks there: rendering (the only writer), tables laid out
for a width, a tool's result, and a question's form asked field by field."""
