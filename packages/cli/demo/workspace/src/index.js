import express from 'express';
import { marked } from 'marked';

const app = express();
app.get('/notes/:id', async (req, res) => {
  res.type('html').send(marked.parse(`# ${req.params.id}`));
});
app.listen(8080);
